import type { StoreErrorPolicy } from '@ratecard/core';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointKey } from '../../src/index.js';
import {
  canStartRedis,
  type RedisAddress,
  type RedisCluster,
  redisCommand,
  startRedisCluster,
} from '../../src/testing.js';
import { CLUSTER_NODES, ready, uniqueOrg } from '../support/redis.js';
import { sleep } from './fleet.js';
import { ENDPOINT, FAULT_CLIENTS, organizationsInSlot, runFault, slotOf } from './scenario.js';

/** This suite starts a cluster of its own (with replicas, and breaks it), even when the shared one is external. */
const canSpawn = CLUSTER_NODES !== null && canStartRedis('@ratecard/redis cluster fault tests');

interface ClusterNode {
  id: string;
  port: number;
  master: boolean;
  /** The id of the master this node replicates, or '-'. */
  masterId: string;
  /** Slot ranges served, inclusive. */
  slots: [number, number][];
}

/** CLUSTER NODES as one node sees it. */
async function clusterNodes(address: RedisAddress): Promise<ClusterNode[]> {
  const text = await redisCommand(address, ['CLUSTER', 'NODES']);
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const [id = '', endpoint = '', flags = '', masterId = '', , , , , ...slots] = line.split(' ');
      return {
        id,
        port: Number(endpoint.split('@')[0]?.split(':')[1]),
        master: flags.split(',').includes('master'),
        masterId,
        slots: slots
          .filter((slot) => !slot.startsWith('['))
          .map((slot) => {
            const [from = '', to = from] = slot.split('-');
            return [Number(from), Number(to)] as [number, number];
          }),
      };
    });
}

function serves(node: ClusterNode, slot: number): boolean {
  return node.slots.some(([from, to]) => from <= slot && slot <= to);
}

/** `field:value` from an INFO section. */
async function infoField(address: RedisAddress, section: string, field: string): Promise<string | undefined> {
  const text = await redisCommand(address, ['INFO', section]);
  return new RegExp(`^${field}:(.*)$`, 'm').exec(text)?.[1]?.trim();
}

/** The fault tests run on ioredis and on node-redis, the two clients whose reconnection logic differs most. */
for (const clientName of FAULT_CLIENTS) {
  describe.skipIf(!canSpawn)(
    `a 3-master Redis Cluster with a replica each breaks under steady traffic, ${clientName}`,
    () => {
      let cluster: RedisCluster;
      let client: Cluster;
      beforeAll(async () => {
        cluster = await startRedisCluster({ masters: 3, replicas: 1 });
        client = new Cluster(cluster.nodes);
        client.on('error', () => {});
        await ready(client);
      }, 60_000);
      afterAll(async () => {
        client?.disconnect();
        await cluster?.stop();
      });

      const target = (): { nodes: RedisAddress[] } => ({ nodes: cluster.nodes });
      const addressOf = (port: number): RedisAddress => ({ host: '127.0.0.1', port });

      /** The master serving `slot`, and its replica, as the first node sees them. */
      async function ownerOf(
        slot: number,
      ): Promise<{ master: ClusterNode; replica: ClusterNode; nodes: ClusterNode[] }> {
        const nodes = await clusterNodes(cluster.masters[0] as RedisAddress);
        const master = nodes.find((node) => node.master && serves(node, slot));
        const replica = nodes.find((node) => node.masterId === master?.id);
        if (master === undefined || replica === undefined)
          throw new Error(`no master with a replica for slot ${slot} in ${JSON.stringify(nodes)}`);
        return { master, replica, nodes };
      }

      it('migrates the slot of live buckets to another master (ASK, then MOVED) with every call settled in time', async () => {
        const slot = slotOf(uniqueOrg('migrate'));
        const [drained = '', ...traffic] = organizationsInSlot('migrate', slot, 5);
        const orgOf = (policy: StoreErrorPolicy | 'drained'): string =>
          policy === 'drained' ? drained : (traffic[['fallback', 'deny', 'allow', 'throw'].indexOf(policy)] as string);
        const { master: source, nodes } = await ownerOf(slot);
        const masters = nodes.filter((node) => node.master && node.slots.length > 0);
        const destination = masters.find((node) => node.id !== source.id) as ClusterNode;
        const others = masters.filter((node) => node.id !== source.id && node.id !== destination.id);
        const from = addressOf(source.port);
        const to = addressOf(destination.port);
        const askingBefore = Number(
          (await infoField(to, 'commandstats', 'cmdstat_asking'))?.match(/calls=(\d+)/)?.[1] ?? 0,
        );

        const { summaries } = await runFault(
          target(),
          client,
          {
            name: `slot ${slot} migrated under traffic`,
            during: 'either',
            inflict: async () => {
              await redisCommand(to, ['CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', source.id]);
              await redisCommand(from, ['CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', destination.id]);
              // One key at a time, with traffic in between: a moved key's calls are redirected with ASK meanwhile.
              for (const organization of [drained, ...traffic]) {
                const moved = await redisCommand(from, [
                  'MIGRATE',
                  '127.0.0.1',
                  String(destination.port),
                  '',
                  '0',
                  '5000',
                  'KEYS',
                  endpointKey(organization, ENDPOINT),
                ]);
                // A bucket under heavy traffic with a huge limit is full again within milliseconds, and a full bucket
                // has no key; only the drained one must be there to move.
                expect(organization === drained ? ['OK'] : ['OK', 'NOKEY']).toContain(moved);
                await sleep(150);
              }
            },
            holdMs: 0,
            repair: async () => {
              // The slot's new owner first, then the old one, then the rest: from now on the old owner answers MOVED.
              for (const node of [destination, source, ...others]) {
                await redisCommand(addressOf(node.port), ['CLUSTER', 'SETSLOT', String(slot), 'NODE', destination.id]);
              }
            },
          },
          orgOf,
          clientName,
        );
        expect(summaries).toHaveLength(4);
        const asking = Number((await infoField(to, 'commandstats', 'cmdstat_asking'))?.match(/calls=(\d+)/)?.[1] ?? 0);
        const movedErrors = (await infoField(from, 'errorstats', 'errorstat_MOVED')) ?? 'none';
        if (process.env.RATECARD_REPORT === '1') {
          console.log(
            `slot ${slot}: ASKING sent to the new owner ${asking - askingBefore} times; old owner's MOVED ${movedErrors}`,
          );
        }
        expect(asking - askingBefore, 'calls redirected with ASK during the migration').toBeGreaterThan(0);
        expect((await ownerOf(slot)).master.id).toBe(destination.id);
      }, 90_000);

      it('kill -9 of a master, its replica promoted: answers by policy, then from the new master, bucket intact', async () => {
        const slot = slotOf(uniqueOrg('failover'));
        const [drained = '', ...traffic] = organizationsInSlot('failover', slot, 5);
        const orgOf = (policy: StoreErrorPolicy | 'drained'): string =>
          policy === 'drained' ? drained : (traffic[['fallback', 'deny', 'allow', 'throw'].indexOf(policy)] as string);
        const { master, replica } = await ownerOf(slot);
        const server = cluster.servers.find((candidate) => candidate.port === master.port);
        if (server === undefined) throw new Error(`no server on port ${master.port}`);
        const replicaAddress = addressOf(replica.port);

        await runFault(
          target(),
          client,
          {
            name: 'cluster master kill -9, replica promoted',
            during: 'away',
            // The drained bucket must be on the replica before its master dies.
            afterDrain: async () => {
              const written = Number(await infoField(addressOf(master.port), 'replication', 'master_repl_offset'));
              let replicated = 0;
              const deadline = performance.now() + 5_000;
              while (replicated < written && performance.now() < deadline) {
                replicated = Number(await infoField(replicaAddress, 'replication', 'slave_repl_offset'));
                if (replicated < written) await sleep(10);
              }
              expect(replicated).toBeGreaterThanOrEqual(written);
            },
            inflict: () => server.kill(),
            holdMs: 1_000,
            repair: async () => {
              // TAKEOVER promotes at once, without waiting cluster-node-timeout (15 s) for the others to agree.
              await redisCommand(replicaAddress, ['CLUSTER', 'FAILOVER', 'TAKEOVER']);
              let role: string | undefined;
              const deadline = performance.now() + 10_000;
              while (role !== 'master' && performance.now() < deadline) {
                role = await infoField(replicaAddress, 'replication', 'role');
                if (role !== 'master') await sleep(20);
              }
              expect(role).toBe('master');
            },
          },
          orgOf,
          clientName,
        );
      }, 90_000);
    },
  );
}
