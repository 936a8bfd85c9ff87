/** Device flags of linux/if.h (ifi_flags / ifi_change). */

export const IFF_UP = 1 << 0;
export const IFF_BROADCAST = 1 << 1;
export const IFF_DEBUG = 1 << 2;
export const IFF_LOOPBACK = 1 << 3;
export const IFF_POINTOPOINT = 1 << 4;
export const IFF_NOTRAILERS = 1 << 5;
export const IFF_RUNNING = 1 << 6;
export const IFF_NOARP = 1 << 7;
export const IFF_PROMISC = 1 << 8;
export const IFF_ALLMULTI = 1 << 9;
export const IFF_MASTER = 1 << 10;
export const IFF_SLAVE = 1 << 11;
export const IFF_MULTICAST = 1 << 12;
export const IFF_PORTSEL = 1 << 13;
export const IFF_AUTOMEDIA = 1 << 14;
export const IFF_DYNAMIC = 1 << 15;
export const IFF_LOWER_UP = 1 << 16;
export const IFF_DORMANT = 1 << 17;
export const IFF_ECHO = 1 << 18;

/** Longest interface name in bytes, without the terminating NUL (IFNAMSIZ - 1). */
export const IFNAMSIZ = 16;
