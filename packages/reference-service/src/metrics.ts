import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import type { LimiterOptions } from '@ratecard/core';
import type { MemoryStore } from '@ratecard/memory';
import { limiterMetrics } from '@ratecard/otel';
import { ConfigError } from './config.js';
import type { Backend } from './store.js';

/** `service.name` of the metrics when the environment names none. */
export const SERVICE_NAME = 'ratecard-reference-service';

/** The Prometheus endpoint, and the limiter's metrics behind it. */
export interface Metrics {
  /** Where Prometheus scrapes: `http://<host>:<port>/metrics`. */
  readonly url: string;
  /** The limiter's stores timed and observed, and its decisions counted (`@ratecard/otel`). */
  instrument(backend: Backend, fallback: MemoryStore): Pick<LimiterOptions, 'store' | 'fallback' | 'onDecision'>;
  /** Stops serving and shuts the meter provider down. */
  close(): Promise<void>;
}

/**
 * An OpenTelemetry meter provider read by the Prometheus exporter, served at `/metrics` on its own port. The exporter
 * can start a server of its own, but it treats port 0 as its default 9464; this server makes `METRICS_PORT=0` pick a
 * free port like `PORT=0` does, and tells which.
 */
export async function startMetrics(port: number, host: string): Promise<Metrics> {
  const exporter = new PrometheusExporter({ preventServerStart: true });
  // The service's own name unless OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) says otherwise; the
  // SDK's default would be `unknown_service:node`.
  const resource = resourceFromAttributes({ 'service.name': SERVICE_NAME }).merge(
    detectResources({ detectors: [envDetector] }),
  );
  const provider = new MeterProvider({ readers: [exporter], resource });
  const metrics = limiterMetrics({ meterProvider: provider });
  const server = createServer((request, response) => {
    const path = request.url?.split('?')[0];
    if (path === '/metrics' && (request.method === 'GET' || request.method === 'HEAD')) {
      exporter.getMetricsRequestHandler(request, response);
      return;
    }
    response.statusCode = path === '/metrics' ? 405 : 404;
    response.end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      reject(
        error.code === 'EADDRINUSE'
          ? new ConfigError(
              `reference-service: METRICS_PORT ${port} is in use; set METRICS_PORT to a free port, or to nothing to serve no metrics`,
            )
          : error,
      );
    });
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${shown}:${address.port}/metrics`,
    instrument: (backend, fallback) => ({
      // A memory store answers in well under a microsecond, less than timing it costs (docs/observability.md, Cost):
      // its counters are observed, its calls not timed. The fallback is timed: it answers only while Redis is down.
      store: backend.kind === 'redis' ? metrics.redis(backend.store) : metrics.memory(backend.store, { time: false }),
      fallback: metrics.memory(fallback),
      onDecision: metrics.onDecision,
    }),
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await provider.shutdown();
    },
  };
}
