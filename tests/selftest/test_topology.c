/* The topology readers (selftest/topology.h) over fixture sysfs trees written here: an 8-GPU
 * node with 8 IB NICs behind 4 PCIe switches on 2 sockets, a PCIe box with nested switches and
 * one Ethernet NIC, a node with no IB, and one full of odd files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "selftest/topology.h"

static char root[PATH_MAX];

/* snprintf that fails the test on truncation (and keeps gcc's truncation guesses quiet). */
static void pathf(char *out, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    assert_true(w >= 0 && (size_t)w < n);
}

static void mkdirs(const char *path)
{
    char buf[PATH_MAX];
    pathf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            assert_true(mkdir(buf, 0755) == 0 || errno == EEXIST);
            *p = '/';
        }
    assert_true(mkdir(buf, 0755) == 0 || errno == EEXIST);
}

/* Write root/rel (parents made); content NULL writes nothing. */
static void put(const char *rel, const char *content)
{
    if (!content)
        return;
    char path[PATH_MAX], dir[PATH_MAX];
    pathf(path, sizeof path, "%s/%s", root, rel);
    pathf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    mkdirs(dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

static void putf(const char *content, const char *fmt, ...)
{
    char rel[PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    put(rel, content);
}

static void link_to(const char *target, const char *rel)
{
    char path[PATH_MAX], dir[PATH_MAX];
    pathf(path, sizeof path, "%s/%s", root, rel);
    pathf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    mkdirs(dir);
    assert_true(symlink(target, path) == 0 || errno == EEXIST);
}

/* A PCI function at chain "pciDDDD:BB/<bdf>/.../<bdf>", linked from /sys/bus/pci/devices the
 * way the kernel does (relative), bridges on the way included. NULL values write no file. */
static void pci_dev(const char *chain, const char *vendor, const char *cls, const char *numa,
                    const char *width)
{
    char sub[PATH_MAX];
    pathf(sub, sizeof sub, "%s", chain);
    for (char *p = strchr(sub, '/'); p; p = strchr(p + 1, '/')) {
        *p = '\0';
        const char *bdf = strrchr(sub, '/') ? strrchr(sub, '/') + 1 : NULL;
        if (bdf) { /* a bridge */
            char target[PATH_MAX], rel[PATH_MAX];
            pathf(target, sizeof target, "../../../devices/%s", sub);
            pathf(rel, sizeof rel, "sys/bus/pci/devices/%s", bdf);
            link_to(target, rel);
            putf("0x8086", "sys/devices/%s/vendor", sub);
            putf("0x060400", "sys/devices/%s/class", sub);
        }
        *p = '/';
    }
    char target[PATH_MAX], rel[PATH_MAX];
    pathf(target, sizeof target, "../../../devices/%s", chain);
    pathf(rel, sizeof rel, "sys/bus/pci/devices/%s", strrchr(chain, '/') + 1);
    putf("", "sys/devices/%s/uevent", chain);
    link_to(target, rel);
    putf(vendor, "sys/devices/%s/vendor", chain);
    putf(cls, "sys/devices/%s/class", chain);
    putf(numa, "sys/devices/%s/numa_node", chain);
    putf(width, "sys/devices/%s/current_link_width", chain);
}

/* class/<cls>/<name>/device -> the PCI function at chain (absolute, realpath resolves both). */
static void class_device(const char *cls, const char *name, const char *chain)
{
    char target[PATH_MAX], rel[PATH_MAX];
    pathf(target, sizeof target, "%s/sys/devices/%s", root, chain);
    pathf(rel, sizeof rel, "sys/class/%s/%s/device", cls, name);
    link_to(target, rel);
}

static void ib_port(const char *dev, int port, const char *rate, const char *state, const char *ll)
{
    putf(rate, "sys/class/infiniband/%s/ports/%d/rate", dev, port);
    putf(state, "sys/class/infiniband/%s/ports/%d/state", dev, port);
    putf(ll, "sys/class/infiniband/%s/ports/%d/link_layer", dev, port);
    char p[PATH_MAX];
    pathf(p, sizeof p, "%s/sys/class/infiniband/%s/ports/%d", root, dev, port);
    mkdirs(p);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static int setup(void **state)
{
    (void)state;
    pathf(root, sizeof root, "/tmp/cps_topo_XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- 8-GPU node: switch s (0..3) on socket s/2 holds GPUs 2s, 2s+1 and mlx5_2s, mlx5_2s+1 */

static void sw_chain(char *out, size_t n, int s, int k)
{
    int rcbus = s < 2 ? 0x00 : 0x80, base = rcbus + 0x10 + 0x10 * (s % 2);
    pathf(out, n, "pci0000:%02x/0000:%02x:%02x.0/0000:%02x:00.0/0000:%02x:%02x.0/0000:%02x:00.0",
             rcbus, rcbus, 1 + s % 2, base, base + 1, k, base + 2 + k);
}

static void build_node8(void)
{
    char chain[PATH_MAX], name[32];
    for (int s = 0; s < 4; s++) {
        const char *numa = s < 2 ? "0\n" : "1\n";
        for (int k = 0; k < 4; k++) {
            sw_chain(chain, sizeof chain, s, k);
            if (k < 2) {
                pci_dev(chain, "0x10de\n", "0x030200\n", numa, "16\n");
            } else {
                pci_dev(chain, "0x15b3\n", "0x020700\n", numa, "16\n");
                pathf(name, sizeof name, "mlx5_%d", 2 * s + k - 2);
                ib_port(name, 1, "400 Gb/sec (4X NDR)\n", "4: ACTIVE\n", "InfiniBand\n");
                class_device("infiniband", name, chain);
            }
        }
    }
    /* ib0 is mlx5_0's netdev: the same NIC, not a second one. */
    sw_chain(chain, sizeof chain, 0, 2);
    class_device("net", "ib0", chain);
    put("sys/class/net/ib0/speed", "400000\n");
    put("sys/class/net/ib0/operstate", "up\n");
    pci_dev("pci0000:00/0000:00:03.0/0000:30:00.0", "0x14e4\n", "0x020000\n", "0\n", "8\n");
    class_device("net", "eth0", "pci0000:00/0000:00:03.0/0000:30:00.0");
    put("sys/class/net/eth0/speed", "25000\n");
    put("sys/class/net/eth0/operstate", "up\n");
    put("sys/class/net/lo/operstate", "unknown\n");
    /* An NVSwitch is NVIDIA's but not a GPU. */
    pci_dev("pci0000:00/0000:00:04.0/0000:40:00.0", "0x10de\n", "0x068000\n", "0\n", NULL);
}

static void test_node8(void **state)
{
    (void)state;
    build_node8();
    cps_topology t;
    assert_int_equal(cps_topo_read_sysfs(root, &t), 0);
    static const char *const pci[8] = {"0000:12:00.0", "0000:13:00.0", "0000:22:00.0",
                                       "0000:23:00.0", "0000:92:00.0", "0000:93:00.0",
                                       "0000:a2:00.0", "0000:a3:00.0"};
    assert_int_equal(t.n_gpus, 8);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(t.gpus[i].index, i);
        assert_string_equal(t.gpus[i].pci, pci[i]);
        assert_string_equal(t.gpus[i].name, "");
        assert_int_equal(t.gpus[i].numa, i < 4 ? 0 : 1);
        assert_int_equal(t.gpus[i].lanes, 16);
    }
    assert_int_equal(t.n_nics, 9);
    for (int i = 0; i < 8; i++) {
        char name[32];
        pathf(name, sizeof name, "mlx5_%d", i);
        assert_string_equal(t.nics[i].name, name);
        assert_int_equal(t.nics[i].kind, CPS_NIC_IB);
        assert_true(t.nics[i].rate_gbps == 400.0);
        assert_int_equal(t.nics[i].up, 1);
        assert_int_equal(t.nics[i].numa, i < 4 ? 0 : 1);
    }
    assert_string_equal(t.nics[8].name, "eth0");
    assert_int_equal(t.nics[8].kind, CPS_NIC_ETH);
    assert_true(t.nics[8].rate_gbps == 25.0);
    assert_int_equal(t.nics[8].up, 1);
    assert_string_equal(t.nics[8].pci, "0000:30:00.0");
    assert_int_equal(t.n_links, 28);
    int n_pix = 0, n_phb = 0, n_sys = 0;
    for (int i = 0; i < t.n_links; i++) {
        const cps_link *l = &t.links[i];
        assert_true(l->a < l->b);
        int want = l->a / 2 == l->b / 2 ? CPS_PATH_PIX : l->a / 4 == l->b / 4 ? CPS_PATH_PHB : CPS_PATH_SYS;
        assert_int_equal(l->path, want);
        assert_int_equal(l->kind, want == CPS_PATH_SYS ? CPS_LINK_SYS : CPS_LINK_PCIE);
        assert_int_equal(l->lanes, 16);
        n_pix += want == CPS_PATH_PIX, n_phb += want == CPS_PATH_PHB, n_sys += want == CPS_PATH_SYS;
    }
    assert_int_equal(n_pix, 4);
    assert_int_equal(n_phb, 8);
    assert_int_equal(n_sys, 16);
    /* GPU to NIC: its own switch, the other switch of its socket, the other socket. */
    assert_int_equal(cps_pci_path(root, "0000:12:00.0", 0, "0000:14:00.0", 0), CPS_PATH_PIX);
    assert_int_equal(cps_pci_path(root, "0000:12:00.0", 0, "0000:24:00.0", 0), CPS_PATH_PHB);
    assert_int_equal(cps_pci_path(root, "0000:12:00.0", 0, "0000:94:00.0", 1), CPS_PATH_SYS);
    assert_int_equal(cps_pci_path(root, "0000:12:00.0", 0, "0000:ff:00.0", 0), CPS_PATH_SYS);

    /* The contract's object, with exactly its keys. */
    json_object *j = cps_topo_json(&t);
    assert_non_null(j);
    assert_int_equal(json_object_object_length(j), 3);
    json_object *gpus, *links, *nics, *v;
    assert_true(json_object_object_get_ex(j, "gpus", &gpus));
    assert_true(json_object_object_get_ex(j, "links", &links));
    assert_true(json_object_object_get_ex(j, "nics", &nics));
    assert_int_equal(json_object_array_length(gpus), 8);
    assert_int_equal(json_object_array_length(links), 28);
    assert_int_equal(json_object_array_length(nics), 9);
    json_object *g4 = json_object_array_get_idx(gpus, 4);
    assert_int_equal(json_object_object_length(g4), 4);
    assert_true(json_object_object_get_ex(g4, "index", &v) && json_object_get_int(v) == 4);
    assert_true(json_object_object_get_ex(g4, "pci", &v));
    assert_string_equal(json_object_get_string(v), "0000:92:00.0");
    assert_true(json_object_object_get_ex(g4, "numa", &v) && json_object_get_int(v) == 1);
    assert_true(json_object_object_get_ex(g4, "name", &v));
    assert_string_equal(json_object_get_string(v), "");
    json_object *l0 = json_object_array_get_idx(links, 0);
    assert_int_equal(json_object_object_length(l0), 4);
    assert_true(json_object_object_get_ex(l0, "kind", &v));
    assert_string_equal(json_object_get_string(v), "PCIE");
    assert_true(json_object_object_get_ex(l0, "lanes", &v) && json_object_get_int(v) == 16);
    json_object *l27 = json_object_array_get_idx(links, 27);
    assert_true(json_object_object_get_ex(l27, "a", &v) && json_object_get_int(v) == 6);
    assert_true(json_object_object_get_ex(l27, "b", &v) && json_object_get_int(v) == 7);
    json_object *l3 = json_object_array_get_idx(links, 3); /* 0-4 */
    assert_true(json_object_object_get_ex(l3, "kind", &v));
    assert_string_equal(json_object_get_string(v), "SYS");
    json_object *n0 = json_object_array_get_idx(nics, 0);
    assert_int_equal(json_object_object_length(n0), 3);
    assert_true(json_object_object_get_ex(n0, "kind", &v));
    assert_string_equal(json_object_get_string(v), "IB");
    assert_true(json_object_object_get_ex(n0, "rate_gbps", &v));
    assert_true(json_object_is_type(v, json_type_int) && json_object_get_int(v) == 400);
    json_object *n8 = json_object_array_get_idx(nics, 8);
    assert_true(json_object_object_get_ex(n8, "kind", &v));
    assert_string_equal(json_object_get_string(v), "ETH");
    json_object_put(j);
    cps_topo_free(&t);
    assert_null(t.gpus);
}

/* ---- PCIe box: 4 GPUs behind two levels of switches, one 100 GbE NIC, no IB */

static void test_pcie_box(void **state)
{
    (void)state;
    const char *sw = "pci0000:00/0000:00:01.0/0000:01:00.0";
    char c[PATH_MAX];
    pathf(c, sizeof c, "%s/0000:02:00.0/0000:03:00.0/0000:04:00.0/0000:05:00.0", sw);
    pci_dev(c, "0x10de\n", "0x030200\n", "0\n", "16\n");
    pathf(c, sizeof c, "%s/0000:02:00.0/0000:03:00.0/0000:04:01.0/0000:06:00.0", sw);
    pci_dev(c, "0x10de\n", "0x030200\n", "0\n", "16\n");
    pathf(c, sizeof c, "%s/0000:02:01.0/0000:07:00.0/0000:08:00.0/0000:09:00.0", sw);
    pci_dev(c, "0x10de\n", "0x030200\n", "0\n", "8\n");
    pathf(c, sizeof c, "%s/0000:02:01.0/0000:07:00.0/0000:08:01.0/0000:0a:00.0", sw);
    pci_dev(c, "0x10DE\n", "0x030000\n", "0\n", "16\n"); /* a VGA-class GPU */
    pci_dev("pci0000:00/0000:00:02.0/0000:0b:00.0", "0x8086\n", "0x020000\n", "0\n", "16\n");
    class_device("net", "eth0", "pci0000:00/0000:00:02.0/0000:0b:00.0");
    put("sys/class/net/eth0/speed", "100000\n");
    put("sys/class/net/eth0/operstate", "up\n");

    cps_topology t;
    assert_int_equal(cps_topo_read_sysfs(root, &t), 0);
    assert_int_equal(t.n_gpus, 4);
    assert_string_equal(t.gpus[3].pci, "0000:0a:00.0");
    assert_int_equal(t.n_nics, 1);
    assert_string_equal(t.nics[0].name, "eth0");
    assert_int_equal(t.nics[0].kind, CPS_NIC_ETH);
    assert_true(t.nics[0].rate_gbps == 100.0);
    assert_int_equal(t.nics[0].numa, 0);
    static const int want_path[6] = {CPS_PATH_PIX, CPS_PATH_PXB, CPS_PATH_PXB,
                                     CPS_PATH_PXB, CPS_PATH_PXB, CPS_PATH_PIX};
    static const int want_lanes[6] = {16, 8, 16, 8, 16, 8};
    assert_int_equal(t.n_links, 6);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(t.links[i].path, want_path[i]);
        assert_int_equal(t.links[i].kind, CPS_LINK_PCIE);
        assert_int_equal(t.links[i].lanes, want_lanes[i]);
    }
    assert_int_equal(t.links[1].a, 0);
    assert_int_equal(t.links[1].b, 2);
    cps_topo_free(&t);
}

/* ---- no IB: two GPUs on two root complexes of one socket, Ethernet down or speedless */

static void test_no_ib(void **state)
{
    (void)state;
    pci_dev("pci0000:00/0000:00:01.0/0000:01:00.0", "0x10de\n", "0x030200\n", "0\n", NULL);
    pci_dev("pci0000:40/0000:40:01.0/0000:41:00.0", "0x10de\n", "0x030200\n", "0\n", NULL);
    pci_dev("pci0000:00/0000:00:02.0/0000:02:00.0", "0x8086\n", "0x020000\n", "0\n", NULL);
    pci_dev("pci0000:00/0000:00:02.0/0000:02:00.1", "0x8086\n", "0x020000\n", "0\n", NULL);
    class_device("net", "eth0", "pci0000:00/0000:00:02.0/0000:02:00.0");
    put("sys/class/net/eth0/speed", "-1\n");
    put("sys/class/net/eth0/operstate", "down\n");
    class_device("net", "eth1", "pci0000:00/0000:00:02.0/0000:02:00.1");
    put("sys/class/net/eth1/operstate", "up\n");
    /* A virtio NIC: its device link ends at virtioN, below the PCI function. */
    pci_dev("pci0000:00/0000:00:03.0/0000:03:00.0", "0x1af4\n", "0x020000\n", "0\n", NULL);
    put("sys/devices/pci0000:00/0000:00:03.0/0000:03:00.0/virtio2/uevent", "");
    class_device("net", "eth2", "pci0000:00/0000:00:03.0/0000:03:00.0/virtio2");
    put("sys/class/net/eth2/speed", "10000\n");
    put("sys/class/net/eth2/operstate", "up\n");

    cps_topology t;
    assert_int_equal(cps_topo_read_sysfs(root, &t), 0);
    assert_int_equal(t.n_gpus, 2);
    assert_int_equal(t.n_nics, 3);
    assert_string_equal(t.nics[2].name, "eth2");
    assert_string_equal(t.nics[2].pci, "0000:03:00.0");
    assert_int_equal(t.nics[2].numa, 0);
    assert_true(t.nics[2].rate_gbps == 10.0);
    assert_string_equal(t.nics[0].name, "eth0");
    assert_true(t.nics[0].rate_gbps == 0.0);
    assert_int_equal(t.nics[0].up, 0);
    assert_string_equal(t.nics[1].name, "eth1");
    assert_true(t.nics[1].rate_gbps == 0.0);
    assert_int_equal(t.nics[1].up, 1);
    assert_int_equal(t.n_links, 1);
    assert_int_equal(t.links[0].path, CPS_PATH_PHB); /* two root complexes, one NUMA node */
    assert_int_equal(t.links[0].kind, CPS_LINK_PCIE);
    assert_int_equal(t.links[0].lanes, 0);
    /* The same pair with its NUMA nodes unknown promises nothing. */
    assert_int_equal(cps_pci_path(root, "0000:01:00.0", -1, "0000:41:00.0", -1), CPS_PATH_SYS);
    cps_topo_free(&t);
}

/* ---- odd files: NIC down, NUMA -1, missing and garbled files, a device that is no symlink */

static void test_odd(void **state)
{
    (void)state;
    pci_dev("pci0000:00/0000:00:01.0/0000:01:00.0", "0x10de\n", "0x030200\n", "-1\n", "16\n");
    pci_dev("pci0000:00/0000:00:02.0/0000:02:00.0", "0x10de\n", "0x030200\n", NULL, "16\n");
    pci_dev("pci0000:00/0000:00:03.0/0000:03:00.0", "0x10de\n", "0x030200\n", "abc\n", "garbage");
    pci_dev("pci0000:00/0000:00:04.0/0000:04:00.0", "0x10de\n", "zzz\n", "0\n", NULL);
    pci_dev("pci0000:00/0000:00:05.0/0000:05:00.0", NULL, "0x030200\n", "0\n", NULL);
    pci_dev("pci0000:00/0000:00:06.0/0000:06:00.0", "0x10de\n", "0x0302\n", "0\n", NULL);
    pci_dev("pci0000:00/0000:00:07.0/0000:07:00.0", "0x10de\n", "", "0\n", NULL);
    /* A plain directory where the kernel puts a symlink: a GPU, with no known path. */
    put("sys/bus/pci/devices/0000:08:00.0/vendor", "0x10de\n");
    put("sys/bus/pci/devices/0000:08:00.0/class", "0x030200\n");
    put("sys/bus/pci/devices/0000:08:00.0/numa_node", "0\n");
    put("sys/bus/pci/devices/not-a-bdf/vendor", "0x10de\n");
    put("sys/bus/pci/devices/not-a-bdf/class", "0x030200\n");

    pci_dev("pci0000:00/0000:00:10.0/0000:10:00.0", "0x15b3\n", "0x020700\n", "1\n", NULL);
    ib_port("mlx5_0", 1, "400 Gb/sec (4X NDR)\n", "1: DOWN\n", "InfiniBand\n");
    class_device("infiniband", "mlx5_0", "pci0000:00/0000:00:10.0/0000:10:00.0");
    ib_port("mlx5_1", 1, NULL, "4: ACTIVE\n", "Ethernet\n");
    ib_port("mlx5_2", 1, "fast!!\n", "zzz", "\x01\x02garbage");
    ib_port("mlx5_3", 1, "200 Gb/sec (4X HDR)\n", "4: ACTIVE\n", NULL);
    ib_port("mlx5_3", 2, "2.5 Gb/sec (1X SDR)\n", "4: ACTIVE\n", NULL);
    put("sys/class/infiniband/mlx5_3/ports/bogus/rate", "100 Gb/sec (4X EDR)\n");
    put("sys/class/infiniband/mlx5_4/node_type", "1: CA\n"); /* no ports at all */
    ib_port("mlx5_5", 1, "400 Mb/sec\n", "4 ACTIVE", NULL);
    pci_dev("pci0000:00/0000:00:20.0/0000:20:00.0", "0x8086\n", "0x020000\n", "7\n", NULL);
    class_device("net", "eth0", "pci0000:00/0000:00:20.0/0000:20:00.0");
    put("sys/class/net/eth0/speed", "garbage");
    put("sys/class/net/eth0/operstate", "up\n");
    put("sys/class/net/broken/operstate", "up\n");
    link_to("/nonexistent/device", "sys/class/net/broken/device");

    cps_topology t;
    assert_int_equal(cps_topo_read_sysfs(root, &t), 0);
    assert_int_equal(t.n_gpus, 4);
    static const char *const pci[4] = {"0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:08:00.0"};
    static const int numa[4] = {-1, -1, -1, 0};
    static const int lanes[4] = {16, 16, 0, 0};
    for (int i = 0; i < 4; i++) {
        assert_string_equal(t.gpus[i].pci, pci[i]);
        assert_int_equal(t.gpus[i].numa, numa[i]);
        assert_int_equal(t.gpus[i].lanes, lanes[i]);
    }
    assert_int_equal(t.n_links, 6);
    for (int i = 0; i < 6; i++) {
        const cps_link *l = &t.links[i];
        int want = l->b == 3 ? CPS_PATH_SYS : CPS_PATH_PHB; /* unresolvable GPU 3: SYS */
        assert_int_equal(l->path, want);
        assert_int_equal(l->kind, want == CPS_PATH_SYS ? CPS_LINK_SYS : CPS_LINK_PCIE);
    }
    assert_int_equal(t.links[0].lanes, 16);
    assert_int_equal(t.links[1].lanes, 0);

    static const struct {
        const char *name;
        int kind, up, numa;
        double rate;
    } want[] = {
        {"mlx5_0", CPS_NIC_IB, 0, 1, 400.0},   {"mlx5_1", CPS_NIC_ROCE, 1, -1, 0.0},
        {"mlx5_2", CPS_NIC_IB, 0, -1, 0.0},    {"mlx5_3:1", CPS_NIC_IB, 1, -1, 200.0},
        {"mlx5_3:2", CPS_NIC_IB, 1, -1, 2.5},  {"mlx5_5", CPS_NIC_IB, 0, -1, 0.0},
        {"eth0", CPS_NIC_ETH, 1, 7, 0.0},
    };
    assert_int_equal(t.n_nics, 7);
    for (int i = 0; i < 7; i++) {
        assert_string_equal(t.nics[i].name, want[i].name);
        assert_int_equal(t.nics[i].kind, want[i].kind);
        assert_int_equal(t.nics[i].up, want[i].up);
        assert_int_equal(t.nics[i].numa, want[i].numa);
        assert_true(t.nics[i].rate_gbps == want[i].rate);
    }
    json_object *j = cps_topo_json(&t);
    assert_non_null(j);
    json_object *nics, *v;
    assert_true(json_object_object_get_ex(j, "nics", &nics));
    json_object *n4 = json_object_array_get_idx(nics, 4);
    assert_true(json_object_object_get_ex(n4, "rate_gbps", &v));
    assert_true(json_object_is_type(v, json_type_double) && json_object_get_double(v) == 2.5);
    json_object *gpus;
    assert_true(json_object_object_get_ex(j, "gpus", &gpus));
    assert_true(json_object_object_get_ex(json_object_array_get_idx(gpus, 0), "numa", &v));
    assert_int_equal(json_object_get_int(v), -1);
    json_object_put(j);
    cps_topo_free(&t);
}

/* ---- a root with nothing in it, or not there at all: empty, not an error */

static void test_empty(void **state)
{
    (void)state;
    cps_topology t;
    assert_int_equal(cps_topo_read_sysfs(root, &t), 0);
    assert_int_equal(t.n_gpus + t.n_nics + t.n_links, 0);
    json_object *j = cps_topo_json(&t);
    assert_non_null(j);
    assert_string_equal(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
                        "{\"gpus\":[],\"links\":[],\"nics\":[]}");
    json_object_put(j);
    cps_topo_free(&t);
    assert_int_equal(cps_topo_read_sysfs("/nonexistent/cps-root", &t), 0);
    assert_int_equal(t.n_gpus + t.n_nics + t.n_links, 0);
    cps_topo_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_node8, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pcie_box, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_ib, setup, teardown),
        cmocka_unit_test_setup_teardown(test_odd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
