/**
 * Sizes libuv's thread pool before anything uses it (imported first by main.ts). The agent runs
 * blocking kernel calls on it (link deletions waiting for RCU, packet-socket closes) beside the IPAM
 * store's file I/O; with the default 4 threads, a burst of DELs would queue every fsync behind them.
 * An explicit UV_THREADPOOL_SIZE in the environment wins.
 */
process.env.UV_THREADPOOL_SIZE ??= '16';
