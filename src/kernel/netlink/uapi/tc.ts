/**
 * Constants of the traffic-control uapi headers podwire uses: linux/rtnetlink.h (TCA_KIND,
 * TCA_OPTIONS; the RTM_* types are in rtnetlink.ts), linux/pkt_sched.h (TC_H_*), linux/pkt_cls.h (TCA_U32_*, TCA_ACT_*,
 * TC_ACT_*) and linux/tc_act/tc_mirred.h (TCA_MIRRED_*, TCA_EGRESS_REDIR).
 */

/** The ingress qdisc's parent, and its handle `ffff:` (TC_H_MAKE(TC_H_INGRESS, 0)). */
export const TC_H_INGRESS = 0xfffffff1;
export const TC_H_INGRESS_HANDLE = 0xffff0000;

/** struct tcmsg's attributes. */
export const TCA_KIND = 1;
export const TCA_OPTIONS = 2;

/** cls_u32's attributes. */
export const TCA_U32_SEL = 5;
export const TCA_U32_ACT = 7;
/** struct tc_u32_sel's flags: a match ends the classification (set by `tc` whenever an action is given). */
export const TC_U32_TERMINAL = 1;

/** An action's attributes (in a TCA_U32_ACT nest, one nest per action, numbered from 1). */
export const TCA_ACT_KIND = 1;
export const TCA_ACT_OPTIONS = 2;

/** act_mirred's attributes. */
export const TCA_MIRRED_PARMS = 2;
export const TCA_EGRESS_REDIR = 1;

/** The verdict of an action that took the packet away (mirred's redirect). */
export const TC_ACT_STOLEN = 4;

/** linux/if_ether.h: every protocol. */
export const ETH_P_ALL = 0x0003;

/** The root of a device's egress (linux/pkt_sched.h TC_H_ROOT). */
export const TC_H_ROOT = 0xffffffff;

/** sch_tbf's attributes (linux/pkt_sched.h). */
export const TCA_TBF_PARMS = 1;
export const TCA_TBF_RATE64 = 4;
/** struct tc_ratespec's link layer: Ethernet (tc sets it; the kernel then needs no rate table). */
export const TC_LINKLAYER_ETHERNET = 1;
