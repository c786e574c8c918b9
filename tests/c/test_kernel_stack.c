/* The recurrence-kernel stack without a GPU: PTX parameter reading, the
 * contract's checks, the built-in kernels' parameters against the argument
 * lists their plans declare (compiled with NVRTC for compute_90), the
 * launches and arguments the persistent and cluster plans make against the
 * formulas of the plans before they were built on the stack, the
 * co-residency rule, a kernel's timeline geometry, and the packed layouts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/error.h"
#include "cuda/ptx.h"
#include "cuda/runtime.h"
#include "lstm/cluster.h"
#include "lstm/kernel_stack.h"
#include "lstm/persistent.h"

static void use_fresh_cache(void)
{
    setenv("SPK_CACHE_DIR", check_scratch_dir("kernel-stack"), 1);
    spk_cache_reset();
}

/* ---- PTX ------------------------------------------------------------------ */

static const char *PTX =
    "//\n.version 8.4\n.target sm_90\n"
    ".visible .entry other(\n\t.param .u32 other_param_0\n)\n{ ret; }\n"
    ".visible .entry k(\n"
    "\t.param .u64 k_param_0,\n"
    "\t.param .u64 .ptr .global .align 4 k_param_1,\n"
    "\t.param .u32 k_param_2,\n"
    "\t.param .f32 k_param_3,\n"
    "\t.param .align 8 .b8 k_param_4[16],\n"
    "\t.param .u16 k_param_5\n"
    ")\n{ ret; }\n"
    ".visible .entry none()\n{ ret; }\n"
    ".visible .entry _Z7mangledPf(\n\t.param .u64 _Z7mangledPf_param_0\n)\n{ ret; }\n";

/* A trace build's arguments: the plain build's, then trace, trace_slot and
 * trace_slots (the convention stack_plan.c builds them by, family.h). */
static const int trace_args[SPK_PERSISTENT_NARGS + 3] = {
    SPK_RA_GATES,     SPK_RA_R,         SPK_RA_BIAS,       SPK_RA_OUTPUT,     SPK_RA_STATE,     SPK_RA_STATUS,
    SPK_RA_BATCH,     SPK_RA_STEPS,     SPK_RA_DIRECTION,  SPK_RA_FIRST_TILE, SPK_RA_TILE_ROWS, SPK_RA_FLAG_BASE,
    SPK_RA_TIMEOUT_NS, SPK_RA_TRACE,    SPK_RA_TRACE_SLOT, SPK_RA_TRACE_SLOTS};

TEST(ptx_params_are_read_by_type_size_and_name)
{
    spk_ptx_param p[8];
    int n = -1;
    CHECK(spk_ptx_entry_params(PTX, strlen(PTX), "k", p, 8, &n) == 0);
    CHECK(n == 6);
    CHECK(strcmp(p[0].type, "u64") == 0 && p[0].size == 8 && p[0].elements == 1);
    CHECK(strcmp(p[1].type, "u64") == 0 && p[1].size == 8 && strcmp(p[1].name, "k_param_1") == 0);
    CHECK(strcmp(p[2].type, "u32") == 0 && p[2].size == 4);
    CHECK(strcmp(p[3].type, "f32") == 0 && spk_ptx_type_class(p[3].type) == 'f');
    CHECK(strcmp(p[4].type, "b8") == 0 && p[4].elements == 16 && p[4].size == 16);
    CHECK(strcmp(p[5].type, "u16") == 0 && p[5].size == 2);
    CHECK(spk_ptx_entry_params(PTX, strlen(PTX), "other", p, 8, &n) == 0 && n == 1);
    CHECK(spk_ptx_entry_params(PTX, strlen(PTX), "none", p, 8, &n) == 0 && n == 0);
    /* more parameters than room */
    CHECK(spk_ptx_entry_params(PTX, strlen(PTX), "k", p, 3, &n) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "more than 3 parameters");
}

TEST(ptx_missing_entries_are_named)
{
    spk_ptx_param p[8];
    int n;
    CHECK(spk_ptx_entry_params(PTX, strlen(PTX), "nope", p, 8, &n) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "no kernel \"nope\" (its kernels: other, k, none, _Z7mangledPf)");
    CHECK(spk_ptx_entry_params(PTX, strlen(PTX), "mangled", p, 8, &n) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "declare the kernel extern \"C\"");
    /* a prefix of a name is not the name; the text ends at its length */
    CHECK(spk_ptx_entry_params(PTX, strlen(PTX), "ot", p, 8, &n) != 0);
    CHECK(spk_ptx_entry_params(PTX, 40, "k", p, 8, &n) != 0);
}

/* ---- the contract ---------------------------------------------------------- */

TEST(contract_names_are_unique_and_found)
{
    for (int i = 0; i < SPK_RA_COUNT; i++) {
        CHECK(spk_recurrence_args[i].name && spk_recurrence_args[i].c_type && spk_recurrence_args[i].meaning);
        CHECK(spk_recurrence_arg_find(spk_recurrence_args[i].name) == i);
        CHECK(spk_arg_size(spk_recurrence_args[i].kind) > 0);
    }
    CHECK(spk_recurrence_arg_find("gate") < 0);
    CHECK_STR_CONTAINS(spk_last_error(), "\"gate\" is not an argument of the recurrence-kernel contract");
    CHECK_STR_CONTAINS(spk_last_error(), "gates, r, bias, output");
}

static spk_ptx_param param(const char *type, size_t size)
{
    spk_ptx_param p = {.elements = 1, .size = size};
    snprintf(p.type, sizeof p.type, "%s", type);
    return p;
}

TEST(params_are_checked_against_the_argument_list)
{
    const int args[4] = {SPK_RA_GATES, SPK_RA_OUTPUT, SPK_RA_BATCH, SPK_RA_TIMEOUT_NS};
    spk_ptx_param ok[4] = {param("u64", 8), param("u64", 8), param("u32", 4), param("u64", 8)};
    CHECK(spk_recurrence_check_params("k", args, 4, ok, 4) == 0);
    spk_ptx_param f[4] = {param("u64", 8), param("u64", 8), param("f32", 4), param("u64", 8)};
    CHECK(spk_recurrence_check_params("k", args, 4, f, 4) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "parameter 3 is a f32 (4 bytes), but args[3] is \"batch\"");
    CHECK_STR_CONTAINS(spk_last_error(), "an int (4 bytes): declare it `int batch`");
    spk_ptx_param narrow[4] = {param("u64", 8), param("u64", 8), param("u32", 4), param("u32", 4)};
    CHECK(spk_recurrence_check_params("k", args, 4, narrow, 4) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "parameter 4 is a u32 (4 bytes), but args[4] is \"timeout_ns\"");
    CHECK(spk_recurrence_check_params("k", args, 4, ok, 3) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel k takes 3 parameters, the argument list names 4: the kernel has no "
                                         "parameter for timeout_ns (argument 4)");
    CHECK(spk_recurrence_check_params("k", args, 3, ok, 4) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "parameter 4 has no argument");
    spk_ptx_param array[4] = {param("u64", 8), param("u64", 8), param("b8", 4), param("u64", 8)};
    array[2].elements = 4;
    CHECK(spk_recurrence_check_params("k", args, 4, array, 4) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "parameter 3 is an array of b8");
    const int twice[2] = {SPK_RA_GATES, SPK_RA_GATES};
    CHECK(spk_recurrence_check_params("k", twice, 2, ok, 2) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "names gates twice (arguments 1 and 2)");
    const int both[2] = {SPK_RA_DIRECTION, SPK_RA_TRACE_DIRECTION};
    spk_ptx_param ints[2] = {param("u32", 4), param("u32", 4)};
    CHECK(spk_recurrence_check_params("k", both, 2, ints, 2) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "trace_direction is for a kernel launched once for both directions");
    size_t sizes[4] = {8, 8, 4, 4};
    CHECK(spk_recurrence_check_sizes("k", args, 4, sizes, 4) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "parameter 4 is 4 bytes, but args[4] is \"timeout_ns\"");
}

/* The parameters of `entry` in a PTX module. */
static int module_params(spk_module *m, const char *entry, spk_ptx_param *p, int *n)
{
    size_t bytes;
    const char *code = spk_module_code(m, &bytes);
    return spk_ptx_entry_params(code, bytes, entry, p, SPK_PTX_MAX_PARAMS, n);
}

TEST(the_persistent_kernel_takes_its_plans_argument_list)
{
    spk_persistent_variant variants[3];
    variants[0] = spk_persistent_variant_for_batch(128, 1);
    variants[1] = spk_persistent_variant_for_batch(128, 64);
    variants[2] = spk_persistent_variant_for_batch(64, 256);
    for (int i = 0; i < 3; i++) {
        spk_ptx_param p[SPK_PTX_MAX_PARAMS];
        int n = 0;
        spk_module *m = spk_persistent_variant_compile(&variants[i], SPK_BUILD_PLAIN, "compute_90");
        CHECK(m && module_params(m, SPK_LSTM_RECURRENCE_KERNEL, p, &n) == 0);
        CHECK(n == SPK_PERSISTENT_NARGS);
        CHECK(spk_recurrence_check_params("persistent", spk_persistent_args, SPK_PERSISTENT_NARGS, p, n) == 0);
        CHECK(memcmp(trace_args, spk_persistent_args, sizeof spk_persistent_args) == 0);
        spk_module_release(m);
        m = spk_persistent_variant_compile(&variants[i], SPK_BUILD_TRACE, "compute_90");
        CHECK(m && module_params(m, SPK_LSTM_RECURRENCE_KERNEL, p, &n) == 0);
        CHECK(spk_recurrence_check_params("persistent trace", trace_args, SPK_PERSISTENT_NARGS + 3, p,
                                          n) == 0);
        spk_module_release(m);
    }
}

TEST(the_cluster_kernels_take_their_plans_argument_list)
{
    for (int64_t batch = 1; batch <= 256; batch *= 16) {
        spk_kernel_choice none;
        memset(&none, 0, sizeof none);
        spk_cluster_variant v;
        CHECK(spk_cluster_variant_resolve(128, batch, &none, &v) == 0);
        for (int push = SPK_PUSH_SCALAR; push <= SPK_PUSH_DIRECT; push++) {
            spk_cluster_variant w = v;
            if (push == SPK_PUSH_SCALAR) {
                w = (spk_cluster_variant){.hidden = 128, .push = SPK_PUSH_SCALAR, .cluster = 8, .gate_block = 1,
                                          .gates_ahead = 1, .row_phases = 1, .max_tile_rows = 1};
                spk_cluster_variant_fit(&w);
            }
            spk_module *m = spk_cluster_variant_compile(&w, SPK_BUILD_PLAIN, "compute_90");
            spk_ptx_param p[SPK_PTX_MAX_PARAMS];
            int n = 0;
            CHECK(m && module_params(m, SPK_LSTM_CLUSTER_KERNEL, p, &n) == 0);
            CHECK(spk_recurrence_check_params("cluster", spk_cluster_args, SPK_CLUSTER_NARGS, p, n) == 0);
            spk_module_release(m);
        }
    }
}

/* ---- the plans' launches and arguments ------------------------------------- */

static const spk_lstm_gpu_shape SHAPE = {.layers = 4, .hidden = 128, .input = 60, .batch = 40, .steps = 589};

/* Fake device addresses, far apart. */
static spk_kernel_stack_addresses fake_addresses(void)
{
    return (spk_kernel_stack_addresses){.gates = (void *)0x10000000, .r = (void *)0x20000000,
                                        .bias = (void *)0x30000000, .output = (void *)0x40000000,
                                        .words = (void *)0x50000000};
}

static void check_arg(const spk_arg *a, spk_arg_kind kind, uint64_t value, const char *what)
{
    uint64_t got = 0;
    switch (kind) {
    case SPK_ARG_PTR: got = (uint64_t)(uintptr_t)a->v.ptr; break;
    case SPK_ARG_I32: got = (uint64_t)(int64_t)a->v.i32; value = (uint64_t)(int64_t)(int32_t)value; break;
    case SPK_ARG_U32: got = a->v.u32; break;
    case SPK_ARG_U64: got = a->v.u64; break;
    default: break;
    }
    if (a->kind != kind || got != value) {
        fprintf(stderr, "  %s: kind %d value %llx, expected kind %d value %llx\n", what, (int)a->kind,
                (unsigned long long)got, (int)kind, (unsigned long long)value);
        CHECK(a->kind == kind && got == value);
    }
}

/* The persistent plan's launches as its launch_direction made them before it
 * was built on the kernel stack, for every layer, direction and launch. */
static void check_persistent(const spk_persistent_variant *v, const spk_schedule *s, uint64_t timeout_ns)
{
    spk_persistent_geometry g;
    CHECK(spk_persistent_variant_check(v, &g) == 0);
    int64_t count = spk_schedule_launch_count(s);
    spk_kernel_stack_launch launches[64];
    spk_kernel_stack_desc d;
    CHECK(spk_persistent_stack_desc(v, s, timeout_ns, &d, launches, 64) == 0);
    CHECK(spk_kernel_stack_desc_check(&d) == 0);
    CHECK(d.nlaunches == 2 * count && d.concurrent == s->concurrent && d.nargs == 13);
    CHECK(d.state_words == s->tiles * g.state_tile && strcmp(d.packing.order, "ifco") == 0 &&
          d.packing.layout == SPK_LSTM_LAYOUT_UNITS && !d.check_writes && d.watchdog_ns == 0);
    const int64_t H = SHAPE.hidden, B = SHAPE.batch, T = SHAPE.steps;
    spk_kernel_stack_addresses a = fake_addresses();
    char *gates = a.gates, *words = a.words, *output = a.output;
    for (int layer = 0; layer < 2; layer++) {
        char *r = (char *)a.r, *bias = (char *)a.bias; /* the layer's tensors (any layer's address) */
        for (int i = 0; i < d.nlaunches; i++) {
            const spk_kernel_stack_launch *l = &launches[i];
            int dir = (int)(i / count);
            int64_t first, tiles;
            CHECK(spk_schedule_launch(s, i % count, &first, &tiles) == 0);
            CHECK(l->direction == dir && l->cooperative && !l->co_resident && l->smem == 0);
            CHECK(l->grid[0] == (unsigned)g.groups && l->grid[1] == (unsigned)tiles && l->grid[2] == 1);
            CHECK(l->block[0] == (unsigned)v->threads && l->block[1] == 1 && l->block[2] == 1);
            CHECK(l->cluster[0] == 0 && l->cluster[1] == 0 && l->cluster[2] == 0);
            spk_arg got[16];
            spk_kernel_stack_args(&d, d.args, d.nargs, &SHAPE, &a, layer, l, got);
            uint64_t expect[13] = {
                (uint64_t)(uintptr_t)(gates + sizeof(float) * (size_t)(dir * B * T * 4 * H)),
                (uint64_t)(uintptr_t)(r + sizeof(float) * (size_t)(dir * 4 * H * H)),
                (uint64_t)(uintptr_t)(bias + sizeof(float) * (size_t)(dir * 4 * H)),
                (uint64_t)(uintptr_t)(output + sizeof(float) * (size_t)(dir * H)),
                (uint64_t)(uintptr_t)(words + 8 * (size_t)(dir * s->tiles * g.state_tile)),
                (uint64_t)(uintptr_t)(words + 8 * (size_t)(2 * s->tiles * g.state_tile)),
                (uint64_t)B, (uint64_t)T, (uint64_t)dir, (uint64_t)first, (uint64_t)s->tile_rows,
                (uint64_t)(layer * T), timeout_ns};
            spk_arg_kind kinds[13] = {SPK_ARG_PTR, SPK_ARG_PTR, SPK_ARG_PTR, SPK_ARG_PTR, SPK_ARG_PTR,
                                      SPK_ARG_PTR, SPK_ARG_I32, SPK_ARG_I32, SPK_ARG_I32, SPK_ARG_I32,
                                      SPK_ARG_I32, SPK_ARG_U32, SPK_ARG_U64};
            for (int k = 0; k < 13; k++)
                check_arg(&got[k], kinds[k], expect[k], spk_recurrence_args[d.args[k]].name);
            /* the trace build: the buffer for the traced layer and direction only, the slots always */
            spk_kernel_stack_addresses t = a;
            t.trace = (void *)0x60000000, t.trace_slot = (void *)0x70000000, t.trace_slots = 3;
            t.trace_layer = 1, t.trace_direction = 1;
            spk_kernel_stack_args(&d, trace_args, 16, &SHAPE, &t, layer, l, got);
            for (int k = 0; k < 13; k++)
                check_arg(&got[k], kinds[k], expect[k], "trace build");
            check_arg(&got[13], SPK_ARG_PTR, layer == 1 && dir == 1 ? 0x60000000 : 0, "trace");
            check_arg(&got[14], SPK_ARG_PTR, 0x70000000, "trace_slot");
            check_arg(&got[15], SPK_ARG_I32, 3, "trace_slots");
        }
    }
}

TEST(persistent_launches_keep_their_arguments)
{
    const int64_t batches[] = {1, 8, 32, 40, 64, 256};
    for (size_t i = 0; i < sizeof batches / sizeof *batches; i++) {
        spk_persistent_variant v = spk_persistent_variant_for_batch(128, batches[i]);
        int64_t heights[SPK_SCHEDULE_MAX_HEIGHTS];
        int n = spk_persistent_variant_heights(&v, heights);
        spk_persistent_geometry g;
        CHECK(spk_persistent_variant_check(&v, &g) == 0);
        /* a roomy device (concurrent), a small one (sequential, several launches a direction) */
        const int64_t capacities[] = {1056, 2 * g.groups};
        for (int c = 0; c < 2; c++) {
            spk_schedule s;
            CHECK(spk_schedule_new(&s, batches[i], capacities[c], capacities[c], g.groups, heights, n) == 0);
            check_persistent(&v, &s, 10000000000ull);
        }
    }
}

TEST(cluster_launches_keep_their_arguments)
{
    const int64_t batches[] = {1, 8, 33, 64, 200, 256, 300};
    for (size_t i = 0; i < sizeof batches / sizeof *batches; i++) {
        spk_kernel_choice none;
        memset(&none, 0, sizeof none);
        spk_cluster_variant v;
        CHECK(spk_cluster_variant_resolve(128, batches[i], &none, &v) == 0);
        int64_t heights[1] = {v.tile_rows > 0 ? v.tile_rows : v.max_tile_rows}, active[1] = {64};
        spk_cluster_schedule s;
        CHECK(spk_cluster_schedule_pick(&s, batches[i], heights, active, 1, heights[0]) == 0);
        spk_kernel_stack_desc d;
        spk_kernel_stack_launch l;
        CHECK(spk_cluster_stack_desc(&v, &s, &d, &l) == 0);
        CHECK(spk_kernel_stack_desc_check(&d) == 0);
        spk_cluster_sizes sizes;
        CHECK(spk_cluster_variant_derive(&v, (int)s.tile_rows, &sizes) == 0);
        /* as the plan's launch_config and launch_layer made it */
        CHECK(d.nlaunches == 1 && l.direction == -1 && !l.cooperative && !l.co_resident && !d.concurrent);
        CHECK(l.grid[0] == (unsigned)v.cluster && l.grid[1] == (unsigned)s.tiles && l.grid[2] == 2);
        CHECK(l.block[0] == (unsigned)v.threads && l.block[1] == 1 && l.block[2] == 1);
        CHECK(l.cluster[0] == (unsigned)v.cluster && l.cluster[1] == 1 && l.cluster[2] == 1);
        CHECK(l.smem == sizes.smem_bytes);
        CHECK(d.state_words == 0 && d.nargs == 8);
        spk_kernel_stack_addresses a = fake_addresses();
        spk_arg got[8];
        spk_kernel_stack_args(&d, d.args, d.nargs, &SHAPE, &a, 2, &l, got);
        uint64_t expect[8] = {0x10000000, 0x20000000, 0x30000000, 0x40000000, 0x50000000,
                              (uint64_t)SHAPE.batch, (uint64_t)SHAPE.steps, (uint64_t)s.tile_rows};
        spk_arg_kind kinds[8] = {SPK_ARG_PTR, SPK_ARG_PTR, SPK_ARG_PTR, SPK_ARG_PTR,
                                 SPK_ARG_PTR, SPK_ARG_I32, SPK_ARG_I32, SPK_ARG_I32};
        for (int k = 0; k < 8; k++)
            check_arg(&got[k], kinds[k], expect[k], spk_recurrence_args[d.args[k]].name);
    }
}

TEST(a_both_directions_launch_gets_whole_buffers_and_the_trace_direction)
{
    const int args[6] = {SPK_RA_GATES, SPK_RA_OUTPUT, SPK_RA_STATE, SPK_RA_TRACE, SPK_RA_TRACE_DIRECTION,
                         SPK_RA_LAYER};
    spk_kernel_stack_launch l = {.direction = -1, .grid = {8, 4, 2}, .block = {256, 1, 1}, .cluster = {8, 1, 1}};
    spk_kernel_stack_desc d = {.name = "k", .args = args, .nargs = 6, .launches = &l, .nlaunches = 1,
                               .state_words = 10, .packing = spk_lstm_packing_builtin()};
    CHECK(spk_kernel_stack_desc_check(&d) == 0);
    spk_kernel_stack_addresses a = fake_addresses();
    a.trace = (void *)0x60000000, a.trace_slot = (void *)0x70000000, a.trace_layer = 3, a.trace_direction = 1;
    spk_arg got[6];
    spk_kernel_stack_args(&d, args, 6, &SHAPE, &a, 3, &l, got);
    check_arg(&got[0], SPK_ARG_PTR, 0x10000000, "gates");
    check_arg(&got[1], SPK_ARG_PTR, 0x40000000, "output");
    check_arg(&got[2], SPK_ARG_PTR, 0x50000000, "state");
    check_arg(&got[3], SPK_ARG_PTR, 0x60000000, "trace");
    check_arg(&got[4], SPK_ARG_I32, 1, "trace_direction");
    check_arg(&got[5], SPK_ARG_I32, 3, "layer");
    spk_kernel_stack_args(&d, args, 6, &SHAPE, &a, 2, &l, got);
    check_arg(&got[3], SPK_ARG_PTR, 0, "trace of another layer");
    check_arg(&got[4], SPK_ARG_I32, (uint64_t)-1, "trace_direction of another layer");
}

TEST(descriptions_are_checked)
{
    const int per_dir[3] = {SPK_RA_GATES, SPK_RA_DIRECTION, SPK_RA_STATE};
    spk_kernel_stack_launch two[2] = {{.direction = 0, .grid = {1, 1, 1}, .block = {32, 1, 1}},
                                      {.direction = 1, .grid = {1, 1, 1}, .block = {32, 1, 1}}};
    spk_kernel_stack_desc d = {.name = "k", .args = per_dir, .nargs = 3, .launches = two, .nlaunches = 2,
                               .state_words = 4, .packing = spk_lstm_packing_builtin()};
    CHECK(spk_kernel_stack_desc_check(&d) == 0);
    spk_kernel_stack_desc e = d;
    e.state_words = 0;
    CHECK(spk_kernel_stack_desc_check(&e) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "takes state: the launch rule must give state_words >= 1");
    e = d;
    e.nlaunches = 1;
    CHECK(spk_kernel_stack_desc_check(&e) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "must cover both directions (forward yes, reverse none)");
    spk_kernel_stack_launch swapped[2] = {two[1], two[0]};
    e = d;
    e.launches = swapped;
    CHECK(spk_kernel_stack_desc_check(&e) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "launch 2 (forward) comes after a reverse launch");
    spk_kernel_stack_launch big[2] = {two[0], two[1]};
    big[1].block[0] = 2048;
    e = d;
    e.launches = big;
    CHECK(spk_kernel_stack_desc_check(&e) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "launch 2 has blocks of 2048 threads, at most 1024");
    const int both[1] = {SPK_RA_GATES};
    spk_kernel_stack_launch coop_cluster = {.direction = -1, .grid = {8, 1, 1}, .block = {32, 1, 1},
                                            .cluster = {8, 1, 1}, .cooperative = true};
    spk_kernel_stack_desc c = {.name = "k", .args = both, .nargs = 1, .launches = &coop_cluster, .nlaunches = 1,
                               .packing = spk_lstm_packing_builtin()};
    CHECK(spk_kernel_stack_desc_check(&c) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "is cooperative and a cluster launch");
    coop_cluster.cooperative = false;
    coop_cluster.grid[0] = 12;
    CHECK(spk_kernel_stack_desc_check(&c) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "is no whole number of clusters");
    coop_cluster.grid[0] = 8;
    coop_cluster.direction = 0;
    CHECK(spk_kernel_stack_desc_check(&c) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "takes no direction argument, so one launch runs both");
    coop_cluster.direction = -1;
    c.concurrent = true;
    CHECK(spk_kernel_stack_desc_check(&c) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "concurrent directions need a kernel that takes direction");
    c.concurrent = false;
    memcpy(c.packing.order, "ifcx", 5);
    CHECK(spk_kernel_stack_desc_check(&c) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "not a permutation of \"iofc\"");
}

/* ---- co-residency ------------------------------------------------------------ */

typedef struct fake_device {
    int64_t blocks, clusters;
} fake_device;

TEST(a_kernels_timeline_geometry_follows_its_launches)
{
    static const int per_direction[] = {SPK_RA_GATES, SPK_RA_OUTPUT, SPK_RA_DIRECTION};
    static const int both[] = {SPK_RA_GATES, SPK_RA_OUTPUT};
    int64_t blocks;
    int warps, group;
    /* a block a batch row and direction: the skeleton's */
    spk_kernel_stack_launch rows[2] = {{.direction = 0, .grid = {3, 1, 1}, .block = {128, 1, 1}},
                                       {.direction = 1, .grid = {3, 1, 1}, .block = {128, 1, 1}}};
    spk_kernel_stack_desc d = {.name = "k", .args = per_direction, .nargs = 3, .launches = rows, .nlaunches = 2};
    spk_kernel_stack_timeline_geometry(&d, &blocks, &warps, &group);
    CHECK(blocks == 3 && warps == 4 && group == 1);
    /* tiles of a direction add up; a partial warp counts; co-resident blocks are one group */
    spk_kernel_stack_launch tiles[4] = {
        {.direction = 0, .grid = {4, 2, 1}, .block = {100, 1, 1}, .co_resident = true},
        {.direction = 0, .grid = {4, 1, 1}, .block = {100, 1, 1}, .co_resident = true, .first_tile = 2},
        {.direction = 1, .grid = {4, 2, 1}, .block = {100, 1, 1}, .co_resident = true},
        {.direction = 1, .grid = {4, 1, 1}, .block = {100, 1, 1}, .co_resident = true, .first_tile = 2}};
    d.launches = tiles, d.nlaunches = 4;
    spk_kernel_stack_timeline_geometry(&d, &blocks, &warps, &group);
    CHECK(blocks == 12 && warps == 4 && group == 8);
    /* one launch for both directions: half its blocks a direction, a cluster a group */
    spk_kernel_stack_launch clusters = {.direction = -1, .grid = {8, 5, 2}, .block = {256, 1, 1},
                                        .cluster = {8, 1, 1}};
    d = (spk_kernel_stack_desc){.name = "k", .args = both, .nargs = 2, .launches = &clusters, .nlaunches = 1};
    spk_kernel_stack_timeline_geometry(&d, &blocks, &warps, &group);
    CHECK(blocks == 40 && warps == 8 && group == 8);
}

static int fake_capacity(void *ctx, const spk_kernel_stack_launch *l, int64_t *capacity)
{
    const fake_device *f = ctx;
    *capacity = l->cluster[0] ? f->clusters : f->blocks;
    return 0;
}

TEST(co_residency_is_refused_before_any_launch)
{
    const int args[1] = {SPK_RA_DIRECTION};
    spk_kernel_stack_launch l[2] = {{.direction = 0, .grid = {66, 1, 1}, .block = {256, 1, 1}, .cooperative = true},
                                    {.direction = 1, .grid = {66, 1, 1}, .block = {256, 1, 1}, .cooperative = true}};
    spk_kernel_stack_desc d = {.name = "k", .args = args, .nargs = 1, .launches = l, .nlaunches = 2,
                               .packing = spk_lstm_packing_builtin()};
    fake_device dev = {.blocks = 132, .clusters = 16};
    CHECK(spk_kernel_stack_check_residency(&d, fake_capacity, &dev) == 0);
    d.concurrent = true; /* 66 + 66 <= 132 */
    CHECK(spk_kernel_stack_check_residency(&d, fake_capacity, &dev) == 0);
    l[1].grid[0] = 67;
    CHECK(spk_kernel_stack_check_residency(&d, fake_capacity, &dev) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "concurrent directions need 66 + 67 co-resident units at once, the device "
                                         "holds 132");
    d.concurrent = false;
    CHECK(spk_kernel_stack_check_residency(&d, fake_capacity, &dev) == 0);
    l[0].grid[0] = 200;
    CHECK(spk_kernel_stack_check_residency(&d, fake_capacity, &dev) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "launch 1 (forward) needs its 200 blocks co-resident (a cooperative launch), "
                                         "the device holds 132 blocks of 256 threads");
    CHECK_STR_CONTAINS(spk_last_error(), "refused before it runs");
    /* blocks that do not wait on each other run in waves */
    l[0].cooperative = false;
    CHECK(spk_kernel_stack_check_residency(&d, fake_capacity, &dev) == 0);
    l[0].co_resident = true;
    CHECK(spk_kernel_stack_check_residency(&d, fake_capacity, &dev) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "(co_resident)");
    /* clusters: one must fit; all of them when they wait on each other */
    const int none[1] = {SPK_RA_GATES};
    spk_kernel_stack_launch c = {.direction = -1, .grid = {8, 40, 2}, .block = {256, 1, 1}, .cluster = {8, 1, 1}};
    spk_kernel_stack_desc cd = {.name = "k", .args = none, .nargs = 1, .launches = &c, .nlaunches = 1,
                                .packing = spk_lstm_packing_builtin()};
    CHECK(spk_kernel_stack_check_residency(&cd, fake_capacity, &dev) == 0);
    c.co_resident = true; /* 80 clusters, 16 fit */
    CHECK(spk_kernel_stack_check_residency(&cd, fake_capacity, &dev) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "needs its 80 clusters co-resident (co_resident), the device holds 16 clusters");
    c.co_resident = false;
    dev.clusters = 0;
    CHECK(spk_kernel_stack_check_residency(&cd, fake_capacity, &dev) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "not one cluster of {8, 1, 1} blocks of 256 threads");
}

/* ---- packings ---------------------------------------------------------------- */

static bool bitwise_equal(const spk_tensor *a, const spk_tensor *b)
{
    return a && b && spk_tensor_numel(a) == spk_tensor_numel(b) &&
           memcmp(spk_tensor_data(a), spk_tensor_data(b), (size_t)spk_tensor_numel(a) * 4) == 0;
}

TEST(every_order_packs_in_both_layouts)
{
    spk_lstm_weights w;
    CHECK(spk_lstm_random(1, 6, 8, 3, 1.0, SPK_F32, &w) == 0);
    const spk_lstm_weights *l = &w;
    const char *letters = "iofc";
    int count = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++) {
                int d = 6 - a - b - c;
                if (a == b || a == c || b == c || d < 0 || d > 3 || d == a || d == b || d == c)
                    continue;
                char order[5] = {letters[a], letters[b], letters[c], letters[d], 0};
                count++;
                spk_tensor *units = spk_lstm_pack_layout(l->R, "iofc", order, SPK_LSTM_LAYOUT_UNITS);
                spk_tensor *plain = spk_lstm_pack_directions(l->R, "iofc", order);
                CHECK(bitwise_equal(units, plain));
                spk_tensor *rows = spk_lstm_pack_layout(l->W, "iofc", order, SPK_LSTM_LAYOUT_ROWS);
                spk_tensor *blocks = spk_lstm_reorder_gates(l->W, 1, "iofc", order);
                CHECK(bitwise_equal(rows, blocks));
                /* the bias: Wb + Rb, placed as the rows */
                spk_tensor *bias = spk_lstm_pack_bias_layout(l->B, "iofc", order, SPK_LSTM_LAYOUT_ROWS);
                const float *src = spk_tensor_data(l->B), *got = spk_tensor_data(bias);
                for (int dir = 0; dir < 2; dir++)
                    for (int g = 0; g < 4; g++)
                        for (int u = 0; u < 8; u++) {
                            int p = (int)(strchr(order, letters[g]) - order);
                            float want = src[dir * 64 + g * 8 + u] + src[dir * 64 + 32 + g * 8 + u];
                            CHECK(got[dir * 32 + p * 8 + u] == want);
                        }
                spk_tensor *ubias = spk_lstm_pack_bias_layout(l->B, "iofc", order, SPK_LSTM_LAYOUT_UNITS);
                spk_tensor *pbias = spk_lstm_pack_bias(l->B, "iofc", order);
                CHECK(bitwise_equal(ubias, pbias));
                spk_tensor_free(units), spk_tensor_free(plain), spk_tensor_free(rows), spk_tensor_free(blocks);
                spk_tensor_free(bias), spk_tensor_free(ubias), spk_tensor_free(pbias);
            }
    CHECK(count == 24);
    spk_lstm_layout layout;
    CHECK(spk_lstm_layout_from_name("rows", &layout) == 0 && layout == SPK_LSTM_LAYOUT_ROWS);
    CHECK(spk_lstm_layout_from_name("blocks", &layout) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "packing layout must be \"units\" (row u*4 + p) or \"rows\" (row p*H + u), "
                                         "got \"blocks\"");
    spk_lstm_weights_free(&w);
}

int main(void)
{
    use_fresh_cache();
    RUN(ptx_params_are_read_by_type_size_and_name);
    RUN(ptx_missing_entries_are_named);
    RUN(contract_names_are_unique_and_found);
    RUN(params_are_checked_against_the_argument_list);
    RUN(the_persistent_kernel_takes_its_plans_argument_list);
    RUN(the_cluster_kernels_take_their_plans_argument_list);
    RUN(persistent_launches_keep_their_arguments);
    RUN(cluster_launches_keep_their_arguments);
    RUN(a_both_directions_launch_gets_whole_buffers_and_the_trace_direction);
    RUN(descriptions_are_checked);
    RUN(co_residency_is_refused_before_any_launch);
    RUN(a_kernels_timeline_geometry_follows_its_launches);
    RUN(every_order_packs_in_both_layouts);
    return CHECK_SUMMARY();
}
