import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidConfigError } from '../../src/base/errors.js';
import { decodeNetworkPolicy } from '../../src/policy/decode-policy.js';

function policy(spec: unknown): unknown {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { namespace: 'ns', name: 'p' },
    spec,
  };
}

function refused(spec: unknown, field: string, words: RegExp): void {
  assert.throws(
    () => decodeNetworkPolicy(policy(spec)),
    (err: unknown) => {
      assert.ok(err instanceof InvalidConfigError, String(err));
      assert.ok(err.message.startsWith(`NetworkPolicy ns/p: ${field}: `), err.message);
      assert.match(err.message, words);
      return true;
    },
  );
}

describe('decoding a NetworkPolicy from the API server', () => {
  test('a full object decodes field for field, with defaults', () => {
    const p = decodeNetworkPolicy(
      policy({
        podSelector: {
          matchLabels: { app: 'web' },
          matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['qa'] }],
        },
        ingress: [
          {
            from: [
              { podSelector: { matchLabels: { role: 'client' } } },
              { namespaceSelector: {} },
              { podSelector: {}, namespaceSelector: { matchLabels: { team: 'a' } } },
              { ipBlock: { cidr: '10.0.0.0/8', except: ['10.1.0.0/16'] } },
            ],
            ports: [
              { port: 80 },
              { protocol: 'UDP', port: 'dns' },
              { protocol: 'SCTP', port: 1000, endPort: 2000 },
            ],
          },
          {},
        ],
        egress: [{ to: [{ ipBlock: { cidr: 'fd00::/64' } }] }],
      }),
    );
    assert.deepEqual(p, {
      namespace: 'ns',
      name: 'p',
      podSelector: {
        matchLabels: { app: 'web' },
        matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['qa'] }],
      },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        {
          peers: [
            {
              kind: 'pods',
              podSelector: { matchLabels: { role: 'client' }, matchExpressions: [] },
              namespaceSelector: null,
            },
            {
              kind: 'pods',
              podSelector: { matchLabels: {}, matchExpressions: [] },
              namespaceSelector: { matchLabels: {}, matchExpressions: [] },
            },
            {
              kind: 'pods',
              podSelector: { matchLabels: {}, matchExpressions: [] },
              namespaceSelector: { matchLabels: { team: 'a' }, matchExpressions: [] },
            },
            { kind: 'ipBlock', ipBlock: { cidr: '10.0.0.0/8', except: ['10.1.0.0/16'] } },
          ],
          ports: [
            { protocol: 'TCP', port: 80 },
            { protocol: 'UDP', port: 'dns' },
            { protocol: 'SCTP', port: 1000, endPort: 2000 },
          ],
        },
        { peers: null, ports: null },
      ],
      egress: [{ peers: [{ kind: 'ipBlock', ipBlock: { cidr: 'fd00::/64', except: [] } }], ports: null }],
    });
  });

  test('policyTypes: missing or empty is Ingress, plus Egress when egress rules exist; given, kept', () => {
    assert.deepEqual(decodeNetworkPolicy(policy({ podSelector: {} })).policyTypes, ['Ingress']);
    assert.deepEqual(decodeNetworkPolicy(policy({ podSelector: {}, policyTypes: [] })).policyTypes, [
      'Ingress',
    ]);
    assert.deepEqual(decodeNetworkPolicy(policy({ podSelector: {}, egress: [{}] })).policyTypes, [
      'Ingress',
      'Egress',
    ]);
    assert.deepEqual(decodeNetworkPolicy(policy({ podSelector: {}, policyTypes: ['Egress'] })).policyTypes, [
      'Egress',
    ]);
  });

  test('`ingress: []` and a missing `from` are different things', () => {
    const none = decodeNetworkPolicy(policy({ podSelector: {}, ingress: [] }));
    assert.deepEqual(none.ingress, []);
    const any = decodeNetworkPolicy(policy({ podSelector: {}, ingress: [{ from: [], ports: [] }] }));
    assert.deepEqual(any.ingress, [{ peers: null, ports: null }]);
  });

  test('CIDRs come out canonical; host bits are cleared (decision 44)', () => {
    const p = decodeNetworkPolicy(
      policy({
        podSelector: {},
        ingress: [
          { from: [{ ipBlock: { cidr: '192.168.1.5/24', except: ['192.168.1.7/25'] } }] },
          { from: [{ ipBlock: { cidr: 'FD00:0:0:0::1/64', except: ['fd00:0::8000:0:0:0/65'] } }] },
        ],
      }),
    );
    assert.deepEqual(p.ingress[0]?.peers, [
      { kind: 'ipBlock', ipBlock: { cidr: '192.168.1.0/24', except: ['192.168.1.0/25'] } },
    ]);
    assert.deepEqual(p.ingress[1]?.peers, [
      { kind: 'ipBlock', ipBlock: { cidr: 'fd00::/64', except: ['fd00::8000:0:0:0/65'] } },
    ]);
  });

  test('refusals name the field', () => {
    const block = (ipBlock: unknown) => ({ podSelector: {}, ingress: [{ from: [{ ipBlock }] }] });
    refused(block({ cidr: '10.0.0/8' }), 'spec.ingress[0].from[0].ipBlock.cidr', /not a valid CIDR/);
    refused(block({ cidr: '10.0.0.0/33' }), 'spec.ingress[0].from[0].ipBlock.cidr', /not a valid CIDR/);
    refused(block({ cidr: '010.0.0.0/8' }), 'spec.ingress[0].from[0].ipBlock.cidr', /not a valid CIDR/);
    refused(block({}), 'spec.ingress[0].from[0].ipBlock.cidr', /required/);
    refused(
      block({ cidr: '10.0.0.0/8', except: ['11.0.0.0/16'] }),
      'spec.ingress[0].from[0].ipBlock.except[0]',
      /strict subset/,
    );
    refused(
      block({ cidr: '10.0.0.0/8', except: ['10.0.0.0/8'] }),
      'spec.ingress[0].from[0].ipBlock.except[0]',
      /strict subset/,
    );
    refused(
      block({ cidr: '10.0.0.0/8', except: ['fd00::/64'] }),
      'spec.ingress[0].from[0].ipBlock.except[0]',
      /family/,
    );
    refused(
      { podSelector: {}, egress: [{ to: [{ ipBlock: { cidr: '10.0.0.0/8' }, podSelector: {} }] }] },
      'spec.egress[0].to[0]',
      /ipBlock together with/,
    );
    refused({ podSelector: {}, ingress: [{ from: [{}] }] }, 'spec.ingress[0].from[0]', /must specify a peer/);
    const port = (p: unknown) => ({ podSelector: {}, ingress: [{ ports: [p] }] });
    refused(port({ protocol: 'ICMP' }), 'spec.ingress[0].ports[0].protocol', /TCP, UDP, SCTP/);
    refused(port({ protocol: 'tcp' }), 'spec.ingress[0].ports[0].protocol', /TCP, UDP, SCTP/);
    refused(port({ port: 0 }), 'spec.ingress[0].ports[0].port', /between 1 and 65535/);
    refused(port({ port: 65536 }), 'spec.ingress[0].ports[0].port', /between 1 and 65535/);
    refused(port({ port: 'HTTP' }), 'spec.ingress[0].ports[0].port', /IANA_SVC_NAME/);
    refused(port({ port: '80' }), 'spec.ingress[0].ports[0].port', /IANA_SVC_NAME/);
    refused(port({ port: 'a-very-long-port-name' }), 'spec.ingress[0].ports[0].port', /IANA_SVC_NAME/);
    refused(port({ endPort: 90 }), 'spec.ingress[0].ports[0].endPort', /without a numeric port/);
    refused(
      port({ port: 'http', endPort: 90 }),
      'spec.ingress[0].ports[0].endPort',
      /without a numeric port/,
    );
    refused(port({ port: 100, endPort: 90 }), 'spec.ingress[0].ports[0].endPort', /greater than port 100/);
    refused(port({ port: 100, endPort: 70000 }), 'spec.ingress[0].ports[0].endPort', /up to 65535/);
    const expr = (e: unknown) => ({ podSelector: { matchExpressions: [e] } });
    refused(
      expr({ key: 'a', operator: 'Is', values: ['x'] }),
      'spec.podSelector.matchExpressions[0].operator',
      /not one of/,
    );
    refused(
      expr({ key: 'a', operator: 'In', values: [] }),
      'spec.podSelector.matchExpressions[0].values',
      /non-empty/,
    );
    refused(
      expr({ key: 'a', operator: 'NotIn' }),
      'spec.podSelector.matchExpressions[0].values',
      /non-empty/,
    );
    refused(
      expr({ key: 'a', operator: 'Exists', values: ['x'] }),
      'spec.podSelector.matchExpressions[0].values',
      /must be empty/,
    );
    refused(
      expr({ key: 'bad key', operator: 'Exists' }),
      'spec.podSelector.matchExpressions[0].key',
      /label key/,
    );
    refused(
      { podSelector: { matchLabels: { a: 'bad value!' } } },
      'spec.podSelector.matchLabels[a]',
      /label value/,
    );
    refused({ podSelector: {}, policyTypes: ['Both'] }, 'spec.policyTypes[0]', /Ingress or Egress/);
    refused({ podSelector: {}, policyTypes: ['Egress', 'Egress'] }, 'spec.policyTypes', /duplicate/);
    refused({ podSelector: {}, ingress: {} }, 'spec.ingress', /must be a list/);
  });

  test('an object without a namespace or name, or not an object, is refused', () => {
    assert.throws(() => decodeNetworkPolicy(null), InvalidConfigError);
    assert.throws(() => decodeNetworkPolicy({ metadata: { name: 'p' }, spec: {} }), /metadata.namespace/);
    assert.throws(
      () => decodeNetworkPolicy({ metadata: { namespace: 'ns', name: '' }, spec: {} }),
      /metadata.name/,
    );
  });

  test('label keys with a DNS prefix pass; port names with a letter pass', () => {
    const p = decodeNetworkPolicy(
      policy({
        podSelector: { matchLabels: { 'app.kubernetes.io/name': 'web', 'kubernetes.io/metadata.name': '' } },
        ingress: [{ ports: [{ port: 'h2c-9' }] }],
      }),
    );
    assert.equal(p.podSelector.matchLabels['app.kubernetes.io/name'], 'web');
    assert.deepEqual(p.ingress[0]?.ports, [{ protocol: 'TCP', port: 'h2c-9' }]);
  });
});
