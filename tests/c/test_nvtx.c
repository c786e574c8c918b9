/* NVTX ranges (cuda/nvtx.h): what spk pushes reaches a profiler's injection
 * library through NVTX itself (tests/c/nvtx_tool.c stands in for Nsight
 * Systems and logs each call), in the domain "spk", nested as pushed; the
 * counts the specs read match; $SPK_NVTX=0 emits nothing. No GPU needed.
 * The placement of the ranges in the forward passes is checked on a GPU
 * (tests/spec/nvtx_spec.lua). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "cuda/nvtx.h"

static char tool_path[PATH_MAX + 32];
static char log_path[PATH_MAX + 32];

static long count_of(const char *wanted)
{
    const char *name;
    long n;
    for (int i = 0; spk_nvtx_count(i, &name, &n) == 0; i++)
        if (strcmp(name, wanted) == 0)
            return n;
    return 0;
}

static char *read_log(void)
{
    static char text[8192];
    text[0] = '\0';
    FILE *f = fopen(log_path, "r");
    if (!f)
        return text;
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

TEST(ranges_reach_the_tool_in_the_spk_domain_nested_as_pushed)
{
    CHECK(spk_nvtx_enabled());
    spk_nvtx_push("forward pass: test");
    spk_nvtx_pushf("layer %d", 3);
    spk_nvtx_push("projections");
    spk_nvtx_pop();
    spk_nvtx_pop();
    spk_nvtx_pop();
    CHECK(spk_nvtx_depth() == 0);
    const char *want = "domain spk\n"
                       "push spk forward pass: test\n"
                       "push spk layer 3\n"
                       "push spk projections\n"
                       "pop spk\n"
                       "pop spk\n"
                       "pop spk\n";
    char *got = read_log();
    if (strcmp(got, want) != 0)
        fprintf(stderr, "  the tool logged:\n%s  expected:\n%s", got, want);
    CHECK(strcmp(got, want) == 0);
}

TEST(counts_each_name_and_the_open_ranges)
{
    spk_nvtx_reset_counts();
    for (int l = 1; l <= 4; l++) {
        spk_nvtx_pushf("layer %d", l);
        spk_nvtx_push("recurrence");
        CHECK(spk_nvtx_depth() == 2);
        spk_nvtx_pop();
        spk_nvtx_pop();
    }
    CHECK(count_of("recurrence") == 4);
    CHECK(count_of("layer 1") == 1 && count_of("layer 4") == 1);
    CHECK(count_of("layer 5") == 0);
    CHECK(spk_nvtx_depth() == 0);
    spk_nvtx_reset_counts();
    CHECK(count_of("recurrence") == 0);
}

TEST(names_past_the_table_count_together)
{
    spk_nvtx_reset_counts();
    for (int i = 0; i < SPK_NVTX_NAMES + 3; i++) {
        spk_nvtx_pushf("name %d", i);
        spk_nvtx_pop();
    }
    CHECK(count_of("name 0") == 1);
    CHECK(count_of("name 63") == 1);
    CHECK(count_of("(other names)") == 3);
    spk_nvtx_reset_counts();
}

/* Run in a child with SPK_NVTX=0: no range, no count, nothing to the tool. */
static int disabled_child(void)
{
    if (spk_nvtx_enabled())
        return 1;
    spk_nvtx_push("layer 1");
    spk_nvtx_pop();
    return count_of("layer 1") == 0 && spk_nvtx_depth() == 0 && read_log()[0] == '\0' ? 0 : 2;
}

TEST(spk_nvtx_0_turns_them_off)
{
    remove(log_path);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("SPK_NVTX", "0", 1);
        execl("/proc/self/exe", "test_nvtx", "--disabled", (char *)NULL);
        _exit(3);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv)
{
    /* the tool beside this program (make builds both into $(BUILD)/tests) */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(tool_path, sizeof tool_path, "%s/nvtx_tool.so", self);
    snprintf(log_path, sizeof log_path, "%s/nvtx_tool_test.log", self);
    /* before the first range: NVTX reads these once */
    setenv("NVTX_INJECTION64_PATH", tool_path, 1);
    setenv("SPK_NVTX_TOOL_LOG", log_path, 1);
    if (argc > 1 && strcmp(argv[1], "--disabled") == 0)
        return disabled_child();
    remove(log_path);
    if (access(tool_path, R_OK) != 0) {
        printf("not ok - the NVTX stand-in %s is missing (make builds it)\n", tool_path);
        check_tests_failed++;
    } else {
        RUN(ranges_reach_the_tool_in_the_spk_domain_nested_as_pushed);
    }
    RUN(counts_each_name_and_the_open_ranges);
    RUN(names_past_the_table_count_together);
    RUN(spk_nvtx_0_turns_them_off);
    remove(log_path);
    return CHECK_SUMMARY();
}
