import type { ErrorDetail } from '@ratecard/http';
import { HttpError, shown } from './errors.js';

/**
 * Reads the fields of a JSON request body and collects every problem, so one 400 names all the bad fields at once
 * (the spec's `details`: one ErrorDetail per problem, its message starting with the field name).
 */
const MAX_PROBLEMS = 10;

export class Fields {
  private readonly body: Record<string, unknown>;
  private readonly problems: ErrorDetail[] = [];
  private readonly names: string[] = [];

  /** `known`: the fields this operation reads; any other field is a problem, so a typo is not silently ignored. */
  constructor(body: unknown, known: readonly string[] | 'any') {
    if (body === undefined) {
      this.body = {};
    } else if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      this.body = {};
      this.add('body', 'invalid_type', `must be a JSON object, got ${shown(body)}`);
    } else {
      this.body = body as Record<string, unknown>;
      if (known !== 'any') {
        for (const field of Object.keys(this.body)) {
          if (!known.includes(field)) {
            this.add(field, 'unknown_field', 'is not a field of this operation');
          }
        }
      }
    }
  }

  string(field: string, problem: (value: string) => string | undefined): string {
    const value = this.body[field];
    if (value === undefined) return this.missing(field, '');
    if (typeof value !== 'string') return this.wrong(field, `must be a string, got ${shown(value)}`, '');
    const reason = problem(value);
    if (reason !== undefined) return this.invalid(field, reason, '');
    return value;
  }

  /** Whether the body holds the field; an optional field is read only when it does. */
  has(field: string): boolean {
    return Object.hasOwn(this.body, field);
  }

  isNull(field: string): boolean {
    return this.body[field] === null;
  }

  boolean(field: string): boolean {
    const value = this.body[field];
    if (value === undefined) return this.missing(field, false);
    if (typeof value !== 'boolean') return this.wrong(field, `must be true or false, got ${shown(value)}`, false);
    return value;
  }

  /** A JSON object; `problem` may refuse its content. */
  object(
    field: string,
    problem: (value: Record<string, unknown>) => string | undefined = () => undefined,
  ): Record<string, unknown> {
    const value = this.body[field];
    if (value === undefined) return this.missing(field, {});
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      return this.wrong(field, `must be a JSON object, got ${shown(value)}`, {});
    }
    const reason = problem(value as Record<string, unknown>);
    if (reason !== undefined) return this.invalid(field, reason, {});
    return value as Record<string, unknown>;
  }

  /** A JSON array of at most `max` items; `problem` may refuse an item (its message names the index). */
  array(field: string, max: number, problem: (item: unknown) => string | undefined): unknown[] {
    const value = this.body[field];
    if (value === undefined) return this.missing(field, []);
    if (!Array.isArray(value)) return this.wrong(field, `must be an array, got ${shown(value)}`, []);
    if (value.length > max) return this.invalid(field, `must hold at most ${max} items, got ${value.length}`, []);
    for (const [index, item] of value.entries()) {
      const reason = problem(item);
      if (reason !== undefined) return this.invalid(field, `item ${index} ${reason}`, []);
    }
    return value;
  }

  integer(field: string, min: number, max: number): number {
    const value = this.body[field];
    if (value === undefined) return this.missing(field, 0);
    if (typeof value !== 'number') return this.wrong(field, `must be a whole number, got ${shown(value)}`, 0);
    if (!Number.isInteger(value) || value < min || value > max) {
      return this.invalid(field, `must be a whole number from ${min} to ${max}, got ${shown(value)}`, 0);
    }
    return value;
  }

  /** Throws the 400 when any problem was found. */
  check(): void {
    if (this.problems.length === 0) return;
    throw new HttpError(400, 'invalid_request', `The request body is invalid: ${this.names.join(', ')}.`, {
      details: this.problems,
    });
  }

  private add(field: string, code: string, message: string): void {
    // A hostile body can hold thousands of unknown fields; the answer names the first few.
    if (this.problems.length >= MAX_PROBLEMS) return;
    const name = field.length > 40 ? `${field.slice(0, 40)}…` : field;
    this.names.push(name);
    this.problems.push({ code, message: `${name}: ${message}` });
  }

  private missing<T>(field: string, placeholder: T): T {
    this.add(field, 'missing_field', 'is required');
    return placeholder;
  }

  private wrong<T>(field: string, message: string, placeholder: T): T {
    this.add(field, 'invalid_type', message);
    return placeholder;
  }

  private invalid<T>(field: string, message: string, placeholder: T): T {
    this.add(field, 'invalid_value', message);
    return placeholder;
  }
}
