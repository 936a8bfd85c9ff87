/**
 * The rows of the Open_vSwitch database podwire reads and writes: one Bridge, its Ports and their
 * Interfaces (vswitch.ovsschema). Port and Interface are not root tables: a Port that no Bridge
 * references, and an Interface that no Port references, are deleted by the server at commit. So a
 * port is added by inserting both rows and referencing the Port from `Bridge.ports` in one
 * transaction, and removed by dropping that reference.
 */
import { DatapathError, type PodwireError } from '../../base/errors.js';
import {
  mapEntries,
  namedUuid,
  optionalInteger,
  optionalString,
  ovsMap,
  ovsSet,
  setMembers,
  uuidText,
} from './ovsdb-atoms.js';
import { type OpResult, type OvsdbClient, OvsdbError } from './ovsdb-client.js';

export const DB = 'Open_vSwitch';

/** A Port row joined with its (single) Interface row. */
export interface PortRow {
  uuid: string;
  name: string;
  /** Interface type: '' for a system interface (a veth end), 'internal' for a port OVS creates. */
  type: string;
  /** OpenFlow port number; undefined until ovs-vswitchd has opened it, -1 when it could not. */
  ofport: number | undefined;
  /** Interface.ofport_request: the number asked for (podwire asks for one for each pod port). */
  ofportRequest: number | undefined;
  /** Interface.error: why ovs-vswitchd could not open the interface. */
  error: string | undefined;
  /** Interface.mac: the MAC requested for an internal interface. */
  mac: string | undefined;
  macInUse: string | undefined;
  externalIds: Record<string, string>;
}

export interface BridgeSettings {
  datapathType: 'system' | 'netdev';
  /** OpenFlow versions the bridge speaks, e.g. ['OpenFlow13', 'OpenFlow15']. */
  protocols: string[];
}

const eq = (column: string, value: unknown) => [column, '==', value];

function rowsOf(r: { rows?: Array<Record<string, unknown>> } | undefined): Array<Record<string, unknown>> {
  return r?.rows ?? [];
}

function dpError(message: string): PodwireError {
  return new DatapathError(message);
}

export class VswitchDb {
  readonly #db: OvsdbClient;
  readonly bridge: string;

  constructor(db: OvsdbClient, bridge: string) {
    this.#db = db;
    this.bridge = bridge;
  }

  /**
   * Creates the bridge if it is missing (equivalent to: `ovs-vsctl add-br BRIDGE -- set Bridge BRIDGE
   * datapath_type=T fail_mode=secure protocols=...`); an existing bridge is adopted. `fail_mode=secure`
   * keeps ovs-vswitchd from installing a NORMAL (learning switch) flow: only podwire's flows forward.
   */
  async ensureBridge(settings: BridgeSettings): Promise<void> {
    const [root, found] = await this.#db.transact(DB, [
      { op: 'select', table: 'Open_vSwitch', where: [], columns: ['_uuid'] },
      {
        op: 'select',
        table: 'Bridge',
        where: [eq('name', this.bridge)],
        columns: ['_uuid', 'datapath_type', 'fail_mode', 'protocols'],
      },
    ]);
    const bridge = rowsOf(found)[0];
    if (bridge) {
      const dpType = optionalString(bridge.datapath_type) ?? '';
      if ((dpType === '' ? 'system' : dpType) !== settings.datapathType) {
        throw dpError(
          `bridge ${this.bridge} has datapath_type ${dpType || 'system'}, the agent config says ${settings.datapathType}`,
        );
      }
      const protocols = setMembers(bridge.protocols).map(String).sort();
      if (
        optionalString(bridge.fail_mode) !== 'secure' ||
        protocols.join() !== [...settings.protocols].sort().join()
      ) {
        await this.#db.transact(DB, [
          {
            op: 'update',
            table: 'Bridge',
            where: [eq('name', this.bridge)],
            row: { fail_mode: 'secure', protocols: ovsSet(settings.protocols) },
          },
        ]);
      }
      return;
    }
    const ops: object[] = [];
    if (rowsOf(root).length === 0) ops.push({ op: 'insert', table: 'Open_vSwitch', row: {} });
    ops.push(
      { op: 'insert', table: 'Interface', row: { name: this.bridge, type: 'internal' }, 'uuid-name': 'li' },
      {
        op: 'insert',
        table: 'Port',
        row: { name: this.bridge, interfaces: namedUuid('li') },
        'uuid-name': 'lp',
      },
      {
        op: 'insert',
        table: 'Bridge',
        row: {
          name: this.bridge,
          datapath_type: settings.datapathType,
          fail_mode: 'secure',
          protocols: ovsSet(settings.protocols),
          other_config: ovsMap({ 'disable-in-band': 'true' }),
          ports: namedUuid('lp'),
        },
        'uuid-name': 'br',
      },
      {
        op: 'mutate',
        table: 'Open_vSwitch',
        where: [],
        mutations: [['bridges', 'insert', ovsSet([namedUuid('br')])]],
      },
    );
    await this.#db.transact(DB, ops);
  }

  /**
   * Adds a port with one interface of `type` to the bridge, replacing a port of the same name.
   * Equivalent to: `ovs-vsctl -- --if-exists del-port NAME -- add-port BRIDGE NAME -- set Interface
   * NAME type=T external_ids:...`.
   */
  async addPort(
    name: string,
    options: {
      type?: '' | 'internal';
      externalIds: Record<string, string>;
      mac?: string;
      mtu?: number;
      /** The OpenFlow port number to give it (Interface `ofport_request`); by default ovs-vswitchd picks. */
      ofportRequest?: number;
    },
  ): Promise<void> {
    const iface: Record<string, unknown> = {
      name,
      type: options.type ?? '',
      external_ids: ovsMap(options.externalIds),
    };
    if (options.mac) iface.mac = options.mac;
    if (options.mtu) iface.mtu_request = options.mtu;
    if (options.ofportRequest) iface.ofport_request = options.ofportRequest;
    const insert = [
      { op: 'insert', table: 'Interface', row: iface, 'uuid-name': 'i' },
      {
        op: 'insert',
        table: 'Port',
        row: { name, interfaces: namedUuid('i'), external_ids: ovsMap(options.externalIds) },
        'uuid-name': 'p',
      },
      {
        op: 'mutate',
        table: 'Bridge',
        where: [eq('name', this.bridge)],
        mutations: [['ports', 'insert', ovsSet([namedUuid('p')])]],
      },
    ];
    let results: OpResult[];
    try {
      results = await this.#db.transact(DB, insert);
    } catch (err) {
      // Port and Interface names are unique (indexes): a port of that name is left over (e.g. from
      // a crash between the veth's creation and its ADD's answer). Replace it, once.
      if (!(err instanceof OvsdbError) || err.error !== 'constraint violation') throw err;
      await this.removePort(name);
      results = await this.#db.transact(DB, insert);
    }
    // A mutate that matched no bridge commits the rows unreferenced, and the server drops them.
    if (results[2]?.count !== 1) throw dpError(`bridge ${this.bridge} does not exist in OVSDB`);
  }

  /**
   * Takes every port of `rows` out of the bridge in one transaction (the server then drops their
   * Port and Interface rows). Equivalent to: `ovs-vsctl -- del-port BRIDGE A -- del-port BRIDGE B ...`.
   */
  async removePorts(rows: readonly PortRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.#db.transact(DB, [
      {
        op: 'mutate',
        table: 'Bridge',
        where: [eq('name', this.bridge)],
        mutations: [['ports', 'delete', ovsSet(rows.map((r) => ['uuid', r.uuid]))]],
      },
    ]);
  }

  /**
   * Removes `other_config:flow-restore-wait` from the Open_vSwitch row; true when it was there.
   * While it is true, an ovs-vswitchd that (re)starts keeps the kernel datapath's flows and does not
   * revalidate them: the pods keep forwarding until whoever set it (the OVS container of deploy/)
   * has the OpenFlow tables back and clears it. Equivalent to: `ovs-vsctl remove Open_vSwitch .
   * other_config flow-restore-wait`.
   */
  async clearFlowRestoreWait(): Promise<boolean> {
    const [found] = await this.#db.transact(DB, [
      { op: 'select', table: 'Open_vSwitch', where: [], columns: ['other_config'] },
    ]);
    const root = rowsOf(found)[0];
    if (!root || mapEntries(root.other_config)['flow-restore-wait'] === undefined) return false;
    await this.#db.transact(DB, [
      {
        op: 'mutate',
        table: 'Open_vSwitch',
        where: [],
        mutations: [['other_config', 'delete', ovsSet(['flow-restore-wait'])]],
      },
    ]);
    return true;
  }

  /** Sets columns of an existing Interface row. */
  async updateInterface(name: string, row: Record<string, unknown>): Promise<void> {
    await this.#db.transact(DB, [{ op: 'update', table: 'Interface', where: [eq('name', name)], row }]);
  }

  /**
   * Equivalent to: `ovs-vsctl --if-exists del-port BRIDGE NAME`. Returns false when there was none.
   * `known` is the port's row when the caller has just read it.
   */
  async removePort(name: string, known?: PortRow): Promise<boolean> {
    const port = known ?? (await this.port(name));
    if (!port) return false;
    const [r] = await this.#db.transact(DB, [
      {
        op: 'mutate',
        table: 'Bridge',
        where: [eq('name', this.bridge)],
        mutations: [['ports', 'delete', ovsSet([['uuid', port.uuid]])]],
      },
    ]);
    return r?.count === 1;
  }

  /** The port `name` if it is a port of this bridge. */
  async port(name: string): Promise<PortRow | undefined> {
    return (await this.#portRows([eq('name', name)]))[0];
  }

  /** Every port of this bridge, the bridge's own local port included. */
  async ports(): Promise<PortRow[]> {
    return this.#portRows([]);
  }

  /**
   * Waits until ovs-vswitchd has given the interface `name` an OpenFlow port number (or -1 with an
   * error), using the OVSDB `wait` operation: one round trip, re-evaluated by the server on every
   * change. Throws ERR_DATAPATH with Interface.error when the port could not be opened.
   */
  async waitOfport(name: string, timeoutMs: number): Promise<PortRow> {
    // One transaction: the wait, then (once it holds) the port's rows as they are then.
    const [, bridges, ports, ifaces] = await this.#db.transact(
      DB,
      [
        {
          op: 'wait',
          table: 'Interface',
          where: [eq('name', name)],
          columns: ['ofport'],
          until: '!=',
          rows: [{ ofport: ovsSet([]) }],
          timeout: timeoutMs,
        },
        ...this.#portSelects([eq('name', name)]),
      ],
      timeoutMs + 5000,
    );
    const [port] = this.#portRowsOf(bridges, ports, ifaces);
    if (!port) throw dpError(`port ${name} vanished from bridge ${this.bridge}`);
    if (port.ofport === undefined || port.ofport < 1) {
      throw dpError(
        `ovs-vswitchd could not add ${name} to ${this.bridge}: ${port.error ?? 'no OpenFlow port'}`,
      );
    }
    return port;
  }

  async #portRows(where: unknown[]): Promise<PortRow[]> {
    const [bridges, ports, ifaces] = await this.#db.transact(DB, this.#portSelects(where));
    return this.#portRowsOf(bridges, ports, ifaces);
  }

  /** The selects that read this bridge's ports matching `where`: Bridge, Port, Interface. */
  #portSelects(where: unknown[]): object[] {
    return [
      { op: 'select', table: 'Bridge', where: [eq('name', this.bridge)], columns: ['ports'] },
      { op: 'select', table: 'Port', where, columns: ['_uuid', 'name', 'interfaces', 'external_ids'] },
      {
        op: 'select',
        table: 'Interface',
        where,
        columns: ['_uuid', 'type', 'ofport', 'ofport_request', 'error', 'mac', 'mac_in_use'],
      },
    ];
  }

  /** The rows `#portSelects` answered, joined: ports of this bridge with their first interface. */
  #portRowsOf(
    bridges: OpResult | undefined,
    ports: OpResult | undefined,
    ifaces: OpResult | undefined,
  ): PortRow[] {
    const bridge = rowsOf(bridges)[0];
    if (!bridge) return [];
    const mine = new Set(setMembers(bridge.ports).map(uuidText));
    const byUuid = new Map(rowsOf(ifaces).map((r) => [uuidText(r._uuid), r]));
    const out: PortRow[] = [];
    for (const p of rowsOf(ports)) {
      const uuid = uuidText(p._uuid);
      if (!mine.has(uuid)) continue;
      const first = setMembers(p.interfaces)[0];
      const iface = first === undefined ? undefined : byUuid.get(uuidText(first));
      out.push({
        uuid,
        name: String(p.name),
        type: iface ? String(iface.type) : '',
        ofport: iface ? optionalInteger(iface.ofport) : undefined,
        ofportRequest: iface ? optionalInteger(iface.ofport_request) : undefined,
        error: iface ? optionalString(iface.error) : undefined,
        mac: iface ? optionalString(iface.mac) : undefined,
        macInUse: iface ? optionalString(iface.mac_in_use) : undefined,
        externalIds: mapEntries(p.external_ids),
      });
    }
    return out;
  }
}
