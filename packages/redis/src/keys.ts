/**
 * Endpoint keys: `<prefix>{<organization>}:<endpoint>`, each name percent-encoded so that the key says whose buckets it
 * holds and nothing else; the value holds the buckets of every limit named there (scripts/bucket.ts). The braces make
 * the organization Redis Cluster's hash tag: every key of an organization lives in one slot, so a batch of its
 * requests can go to Redis in one script call.
 *
 * The encoding escapes `%` (so it can be decoded, hence injective), `{` and `}` (so no organization can end the hash
 * tag early or open another), `:` (so tools that split keys on colons show prefix, organization, endpoint) and lone
 * UTF-16 surrogates (Redis keys are UTF-8 bytes, and UTF-8 cannot carry them: two names differing only there would
 * otherwise both become U+FFFD and share a key). Everything else, spaces and unicode included, is kept as is.
 */

const NEEDS_ESCAPE = /[%{}:\uD800-\uDFFF]/;

/** The percent-encoding of one name (organization or endpoint); the identity for most names. */
export function encodeName(name: string): string {
  if (!NEEDS_ESCAPE.test(name)) return name;
  let out = '';
  for (let i = 0; i < name.length; i++) {
    const code = name.charCodeAt(i);
    if (code === 0x25) out += '%25';
    else if (code === 0x7b) out += '%7B';
    else if (code === 0x7d) out += '%7D';
    else if (code === 0x3a) out += '%3A';
    else if (code >= 0xd800 && code <= 0xdfff) {
      const next = name.charCodeAt(i + 1);
      if (code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        // A well-formed pair is an ordinary character beyond the BMP.
        out += name[i] + (name[i + 1] as string);
        i++;
      } else {
        out += `%u${code.toString(16).toUpperCase()}`;
      }
    } else out += name[i];
  }
  return out;
}

/** Inverse of `encodeName` (for tests and for reading keys back); throws on a string it could not have produced. */
export function decodeName(encoded: string): string {
  let out = '';
  for (let i = 0; i < encoded.length; i++) {
    const char = encoded[i] as string;
    if (char !== '%') {
      out += char;
      continue;
    }
    const wide = encoded[i + 1] === 'u';
    const digits = encoded.slice(wide ? i + 2 : i + 1, wide ? i + 6 : i + 3);
    if (!/^[0-9A-F]+$/.test(digits) || digits.length !== (wide ? 4 : 2)) {
      throw new Error(`ratecard: not an encoded name: ${JSON.stringify(encoded)}`);
    }
    out += String.fromCharCode(Number.parseInt(digits, 16));
    i += wide ? 5 : 2;
  }
  return out;
}

/** Most endpoints whose encodings are remembered. */
const MAX_REMEMBERED = 1024;

/** The Redis keys of endpoints. Endpoints (rule keys) are few, so the encoding of each is remembered. */
export class KeyEncoder {
  /** endpoint → its encoding. */
  private readonly encoded = new Map<string, string>();

  /** The one hash of every block (scripts/blocks.ts): no hash tag, so it lives in one slot, on one master. */
  readonly blocks: string;

  constructor(readonly prefix: string) {
    // Braces are refused in a prefix, so no endpoint key (whose organization is in braces) is this one.
    this.blocks = `${prefix}blocks`;
  }

  key(organization: string, endpoint: string): string {
    let suffix = this.encoded.get(endpoint);
    if (suffix === undefined) {
      suffix = encodeName(endpoint);
      // A bound, so that a caller passing raw paths as endpoints cannot grow the map without end.
      if (this.encoded.size < MAX_REMEMBERED) this.encoded.set(endpoint, suffix);
    }
    // The encoded organization is also the key's hash tag.
    return `${this.prefix}{${encodeName(organization)}}:${suffix}`;
  }
}

/** A block's field in the blocks hash: the organization and endpoint encoded, so that no two pairs share one. */
export function blockField(organization: string, endpoint: string): string {
  return `${encodeName(organization)}:${encodeName(endpoint)}`;
}

/** The organization and endpoint of a block's field; undefined for a field ratecard would not write. */
export function blockOf(field: string): { organization: string; endpoint: string } | undefined {
  const cut = field.indexOf(':');
  if (cut < 1) return undefined;
  try {
    return { organization: decodeName(field.slice(0, cut)), endpoint: decodeName(field.slice(cut + 1)) };
  } catch {
    return undefined;
  }
}
