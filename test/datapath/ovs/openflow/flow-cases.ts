/**
 * Every flow set pipeline.ts can produce, by name: pipelineFlows with and without an uplink and with
 * zero, one or two gateway IPv4 addresses; podFlows for IPv4-only, IPv6-only and dual-stack pods,
 * untagged and in a VLAN, and a pool pod's; vlanFloodFlow with and without an uplink, and with no
 * local pod (drop); underlayFloodFlow with and without pool pods.
 * Shared by the golden test (ovs-ofctl's own printing) and the real-switch test.
 */
import {
  pipelineFlows,
  podCookie,
  podFlows,
  underlayFloodFlow,
  vlanFloodFlow,
} from '../../../../src/datapath/ovs/pipeline.js';
import { ConjunctionIds, policyFlows } from '../../../../src/datapath/ovs/policy-flows.js';

const GW_MAC = '02:AA:BB:CC:DD:EE';

export function flowCases(): Map<string, string[]> {
  const cases = new Map<string, string[]>();
  for (const ipv4s of [[], ['10.244.1.1'], ['10.244.1.1', '192.168.50.7']]) {
    for (const uplinkOfport of [undefined, 3]) {
      const name = `pipeline ipv4s=${ipv4s.length}${uplinkOfport === undefined ? '' : ' uplink'}`;
      cases.set(
        name,
        pipelineFlows(
          uplinkOfport === undefined
            ? { ofport: 1, mac: GW_MAC, ipv4s }
            : { ofport: 1, mac: GW_MAC, ipv4s, uplinkOfport },
        ),
      );
    }
  }
  const stacks: Record<string, string[]> = {
    ipv4: ['10.244.1.2'],
    ipv6: ['fd00:10:244:1:0:0:0:2'],
    dual: ['10.244.1.3', 'fd00:10:244:1::3'],
  };
  for (const [stack, ips] of Object.entries(stacks)) {
    for (const vlan of [0, 100, 4094]) {
      const cookie = podCookie(`pw-${stack}-${vlan}`);
      cases.set(
        `pod ${stack} vlan=${vlan}`,
        podFlows({ ofport: 7, mac: '0A:58:0A:F4:01:02', ips, cookie, vlan }),
      );
    }
  }
  cases.set(
    'pool pod dual',
    podFlows({
      ofport: 9,
      mac: '0A:58:C0:00:02:65',
      ips: ['192.0.2.101', '2001:db8::65'],
      cookie: podCookie('pw-pool'),
      underlay: true,
    }),
  );
  cases.set('underlay flood', [underlayFloodFlow(1, [9, 12])]);
  cases.set('underlay flood, gateway only', [underlayFloodFlow(1, [])]);
  cases.set('vlan flood, no uplink', [vlanFloodFlow(100, [7, 8])]);
  cases.set('vlan flood, uplink', [vlanFloodFlow(100, [7, 8], 3)]);
  cases.set('vlan flood, uplink only', [vlanFloodFlow(4094, [], 3)]);
  cases.set('vlan flood, nothing (drop)', [vlanFloodFlow(200, [])]);
  // NetworkPolicy (policy-flows.ts): conjunctions over TCP, UDP and SCTP port ranges, both families.
  const rule = (id: string) => ({
    id,
    entries: [
      {
        peers: ['10.244.1.0/25', '0.0.0.0/0', 'fd00:10:244:1::/64', '2001:db8::7/128'],
        ports: [
          { protocol: 'TCP' as const, first: 1000, last: 2000 },
          { protocol: 'UDP' as const, first: 53, last: 53 },
          { protocol: 'SCTP' as const, first: 0, last: 65535 },
        ],
      },
      { peers: 'any' as const, ports: [{ protocol: 'TCP' as const, first: 8080, last: 8080 }] },
      { peers: ['192.0.2.0/24'], ports: 'any' as const },
      { peers: 'any' as const, ports: 'any' as const },
    ],
  });
  const pod = (name: string) => ({
    namespace: 'ns',
    name,
    ips: ['10.244.1.5', 'fd00:10:244:1::5'],
    ingress: { policies: ['ns/p'], rules: [rule('ns/p/ingress/0')] },
    egress: { policies: ['ns/p'], rules: [] },
  });
  cases.set(
    'policy',
    policyFlows(
      { gatewayOfport: 1, nodeIps: ['10.244.1.1', 'fd00:10:244:1::1'] },
      [pod('a')],
      new ConjunctionIds(),
    ).flows,
  );
  return cases;
}

/** Every case's flows, one list (a flow appears once per case it is in). */
export function allCaseFlows(): string[] {
  return [...flowCases().values()].flat();
}
