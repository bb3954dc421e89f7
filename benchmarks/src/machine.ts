import { arch, cpus as cpuList, loadavg, platform, release, totalmem } from 'node:os';
import type { Machine } from './results.js';

/** The machine the figures came from; Redis fields are filled in once a server is up. */
export function describeMachine(): Machine {
  const cpus = cpuList();
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    node: process.version,
    platform: `${platform()} ${release()} ${arch()}`,
    totalMemoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    redis: null,
    redisSource: null,
    loadAverage: { start: oneMinuteLoad(), end: null },
  };
}

export function oneMinuteLoad(): number {
  return Math.round((loadavg()[0] ?? 0) * 100) / 100;
}

export function machineLine(machine: Machine): string {
  const redis = machine.redis === null ? '' : `, Redis ${machine.redis} (${machine.redisSource})`;
  return `${machine.cpu}, ${machine.cores} cores, Node ${machine.node}, ${machine.platform}${redis}`;
}
