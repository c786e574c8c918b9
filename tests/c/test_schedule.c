/* Tile schedules: every reference test vector,
 * plus the checker of script-made schedules. */
#include "check.h"
#include "core/error.h"
#include "lstm/lstm.h"

static const int64_t heights[3] = {8, 16, 32};

static int make(spk_schedule *s, int64_t batch, int64_t capacity, int64_t concurrent)
{
    return spk_schedule_new(s, batch, capacity, concurrent, 32, heights, 3);
}

/* Checks the launch list against expected (first, count) pairs. */
static int launches_are(const spk_schedule *s, int n, const int64_t expected[][2])
{
    if (spk_schedule_launch_count(s) != n)
        return 0;
    for (int i = 0; i < n; i++) {
        int64_t first, count;
        if (spk_schedule_launch(s, i, &first, &count) || first != expected[i][0] || count != expected[i][1])
            return 0;
    }
    return 1;
}

TEST(batch_32_capacity_350_is_concurrent_8_rows)
{
    spk_schedule s;
    CHECK(make(&s, 32, 350, 350) == 0);
    CHECK(s.tile_rows == 8 && s.tiles == 4 && s.concurrent && s.tiles_per_launch == 4);
    const int64_t want[][2] = {{0, 4}};
    CHECK(launches_are(&s, 1, want));
}

TEST(batch_64_capacity_350_takes_16_rows)
{
    spk_schedule s;
    CHECK(make(&s, 64, 350, 350) == 0);
    CHECK(s.tile_rows == 16 && s.tiles == 4 && s.concurrent);
}

TEST(batch_65_capacity_65_is_sequential)
{
    spk_schedule s;
    CHECK(make(&s, 65, 65, 65) == 0);
    CHECK(!s.concurrent && s.tile_rows == 32 && s.tiles == 3 && s.tiles_per_launch == 2);
    const int64_t want[][2] = {{0, 2}, {2, 1}};
    CHECK(launches_are(&s, 2, want));
}

TEST(batch_64_capacity_32_two_sequential_launches)
{
    spk_schedule s;
    CHECK(make(&s, 64, 32, 32) == 0);
    CHECK(!s.concurrent && s.tile_rows == 32 && s.tiles == 2 && s.tiles_per_launch == 1);
    const int64_t want[][2] = {{0, 1}, {1, 1}};
    CHECK(launches_are(&s, 2, want));
}

TEST(batch_1_capacity_31_is_an_error)
{
    spk_schedule s;
    CHECK(make(&s, 1, 31, 31) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "needs 32 co-resident blocks, only 31 available");
    CHECK(make(&s, 1, 31, SPK_SCHEDULE_UNKNOWN) == -1);
}

TEST(unknown_concurrent_capacity_is_sequential)
{
    spk_schedule s;
    CHECK(make(&s, 32, 350, SPK_SCHEDULE_UNKNOWN) == 0);
    CHECK(!s.concurrent && s.tile_rows == 32 && s.tiles == 1 && s.tiles_per_launch == 10);
    const int64_t want[][2] = {{0, 1}};
    CHECK(launches_are(&s, 1, want));
}

TEST(smaller_concurrent_capacity_decides)
{
    spk_schedule s;
    /* capacity alone would allow 8 rows (4 tiles * 64 = 256), the concurrent one not */
    CHECK(make(&s, 32, 350, 200) == 0);
    CHECK(s.concurrent && s.tile_rows == 16 && s.tiles == 2);
    const int64_t custom[2] = {4, 12};
    CHECK(spk_schedule_new(&s, 24, 128, 128, 16, custom, 2) == 0);
    /* 4 rows: 6 tiles * 2 * 16 = 192 > 128; 12 rows: 2 tiles * 32 = 64 fits */
    CHECK(s.concurrent && s.tile_rows == 12 && s.tiles == 2 && s.groups == 16 && s.tiles_per_launch == 2);
    int64_t first, count;
    CHECK(spk_schedule_launch(&s, 1, &first, &count) == -1);
}

TEST(bad_arguments)
{
    spk_schedule s;
    CHECK(make(&s, 0, 350, 350) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "batch must be at least 1");
    const int64_t zero[1] = {0};
    CHECK(spk_schedule_new(&s, 4, 350, 350, 32, zero, 1) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "tile height 1 is 0");
    CHECK(spk_schedule_new(&s, 4, 350, 350, 32, heights, 0) == -1);
}

TEST(check_accepts_made_schedules)
{
    const int64_t cases[][3] = {{32, 350, 350}, {65, 65, 65}, {64, 32, 32}, {1000, 96, -1}, {7, 1000, 1000}};
    for (unsigned c = 0; c < sizeof cases / sizeof *cases; c++) {
        spk_schedule s;
        CHECK(make(&s, cases[c][0], cases[c][1], cases[c][2]) == 0);
        int64_t n = spk_schedule_launch_count(&s), firsts[64], counts[64];
        for (int64_t i = 0; i < n; i++)
            spk_schedule_launch(&s, i, &firsts[i], &counts[i]);
        CHECK(spk_schedule_check(&s, cases[c][0], firsts, counts, n) == 0);
    }
}

TEST(check_rejects_broken_schedules)
{
    spk_schedule s = {.batch = 65, .groups = 32, .tile_rows = 32, .tiles = 3, .tiles_per_launch = 2};
    const int64_t f_ok[2] = {0, 2}, c_ok[2] = {2, 1};
    CHECK(spk_schedule_check(&s, 65, f_ok, c_ok, 2) == 0);
    const int64_t f_overlap[2] = {0, 1}, c_overlap[2] = {2, 2};
    CHECK(spk_schedule_check(&s, 65, f_overlap, c_overlap, 2) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "launch 2 starts at tile 1, overlapping");
    const int64_t f_gap[2] = {0, 2}, c_gap[2] = {1, 1};
    CHECK(spk_schedule_check(&s, 65, f_gap, c_gap, 2) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "leaving tiles 1..1 uncovered");
    const int64_t f_short[1] = {0}, c_short[1] = {2};
    CHECK(spk_schedule_check(&s, 65, f_short, c_short, 1) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "leaving tiles 2..2 uncovered");
    const int64_t f_big[1] = {0}, c_big[1] = {3};
    CHECK(spk_schedule_check(&s, 65, f_big, c_big, 1) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "count 3, expected 1..2");
    CHECK(spk_schedule_check(&s, 100, f_ok, c_ok, 2) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "3 tiles of 32 rows cover 96 rows, the batch has 100");
    CHECK(spk_schedule_check(&s, 64, f_ok, c_ok, 2) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "leave tile 2 empty");
    const int64_t f_past[2] = {0, 2}, c_past[2] = {2, 2};
    CHECK(spk_schedule_check(&s, 65, f_past, c_past, 2) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "beyond the last tile 2");
    s.tile_rows = 0;
    CHECK(spk_schedule_check(&s, 65, f_ok, c_ok, 2) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "must be positive");
}

int main(void)
{
    RUN(batch_32_capacity_350_is_concurrent_8_rows);
    RUN(batch_64_capacity_350_takes_16_rows);
    RUN(batch_65_capacity_65_is_sequential);
    RUN(batch_64_capacity_32_two_sequential_launches);
    RUN(batch_1_capacity_31_is_an_error);
    RUN(unknown_concurrent_capacity_is_sequential);
    RUN(smaller_concurrent_capacity_decides);
    RUN(bad_arguments);
    RUN(check_accepts_made_schedules);
    RUN(check_rejects_broken_schedules);
    return CHECK_SUMMARY();
}
