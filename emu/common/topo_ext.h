/* topo_ext: helpers over topo.h that the emulated libraries share beyond its fixed contract.
 *
 * Kept out of topo.h so that header stays the contract the NCCL emulation codes against;
 * everything here is derived from a loaded cpemu_topo and the environment.
 */
#ifndef COLLPROF_EMU_TOPO_EXT_H
#define COLLPROF_EMU_TOPO_EXT_H

#include <stddef.h>
#include <stdint.h>

#include "emu/common/topo.h"

/* The presets by name; 0 when known (t filled, faults and hosts untouched), -1 otherwise. */
int cpemu_topo_preset(cpemu_topo *t, const char *name);

/* Parses a topology file (format: docs/EMULATION.md, "Topology files") into t's GPUs, links
 * and NICs. -1 with err naming the file and line when it is unusable. */
int cpemu_topo_parse_file(cpemu_topo *t, const char *path, char *err, size_t errlen);

/* Reads the fault and host variables (COLLPROF_EMU_HOSTS, _NET, _DELAY, _SLOW_LINK, _HANG,
 * _CLOCK_OFFSET_US) into t; a bad value warns once and keeps the default. */
void cpemu_topo_read_env(cpemu_topo *t);

/* The GPUs this process sees, in ordinal order: CUDA_VISIBLE_DEVICES as a comma list of
 * topology indices (an unparsable or out-of-range entry ends the list there, as CUDA does),
 * all of the host's GPUs without it. map[i] is the topology index of ordinal i. Returns the
 * count (0..t->ngpus). */
int cpemu_visible_devices(const cpemu_topo *t, int map[CPEMU_MAX_GPUS]);

/* The UUID of topology GPU `dev` on emulated host `host`: stable, and different on every
 * emulated host as real GPUs' are. */
void cpemu_gpu_uuid(const cpemu_topo *t, int host, int dev, unsigned char out[16]);
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" for those 16 bytes. */
void cpemu_uuid_format(const unsigned char uuid[16], char out[48]);

/* The real hostname of this machine, read with the uname system call so that an override
 * of gethostname()/uname() (libcollprof-emuhost.so) cannot change it. */
void cpemu_real_hostname(char *out, size_t cap);

/* Parses "dddd:bb:dd.f" (hex). 0, or -1 when malformed. */
int cpemu_parse_pci(const char *s, unsigned *domain, unsigned *bus, unsigned *device,
                    unsigned *function);

/* Emulated GPUs behind NVSwitches rather than wired pairwise: every pair uses all lanes. */
int cpemu_topo_nvswitch(const cpemu_topo *t);

#endif
