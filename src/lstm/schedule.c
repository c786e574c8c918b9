/* Tile schedules of the persistent recurrence kernel: how a batch is cut into
 * tiles and how many tiles one cooperative launch can hold. */
#include "core/error.h"
#include "lstm/lstm.h"

int spk_schedule_new(spk_schedule *out, int64_t batch, int64_t capacity, int64_t concurrent_capacity,
                     int64_t groups, const int64_t *heights, int height_count)
{
    if (batch < 1)
        return spk_fail("schedule: batch must be at least 1, got %lld", (long long)batch);
    if (groups < 1)
        return spk_fail("schedule: groups must be at least 1, got %lld", (long long)groups);
    if (!heights || height_count < 1 || height_count > SPK_SCHEDULE_MAX_HEIGHTS)
        return spk_fail("schedule: between 1 and %d tile heights needed, got %d", SPK_SCHEDULE_MAX_HEIGHTS,
                        height_count);
    int64_t largest = 0;
    for (int i = 0; i < height_count; i++) {
        if (heights[i] < 1)
            return spk_fail("schedule: tile height %d is %lld, must be at least 1", i + 1, (long long)heights[i]);
        if (heights[i] > largest)
            largest = heights[i];
    }
    if (concurrent_capacity < 0 && concurrent_capacity != SPK_SCHEDULE_UNKNOWN)
        return spk_fail("schedule: concurrent capacity %lld is negative", (long long)concurrent_capacity);
    /* Every block of a tile must be resident at once, or the cross-block waits
     * of the recurrence never finish. */
    if (capacity < groups)
        return spk_fail("schedule: a tile needs %lld co-resident blocks, only %lld available", (long long)groups,
                        (long long)capacity);

    out->batch = batch;
    out->groups = groups;
    if (concurrent_capacity != SPK_SCHEDULE_UNKNOWN) {
        int64_t room = capacity < concurrent_capacity ? capacity : concurrent_capacity;
        for (int i = 0; i < height_count; i++) {
            int64_t tiles = (batch + heights[i] - 1) / heights[i];
            if (tiles * 2 * groups <= room) {
                out->tile_rows = heights[i];
                out->tiles = tiles;
                out->tiles_per_launch = tiles;
                out->concurrent = true;
                return 0;
            }
        }
    }
    out->tile_rows = largest;
    out->tiles = (batch + largest - 1) / largest;
    out->tiles_per_launch = capacity / groups;
    out->concurrent = false;
    return 0;
}

int64_t spk_schedule_launch_count(const spk_schedule *s)
{
    if (s->tiles < 1 || s->tiles_per_launch < 1)
        return 0;
    return (s->tiles + s->tiles_per_launch - 1) / s->tiles_per_launch;
}

int spk_schedule_launch(const spk_schedule *s, int64_t index, int64_t *first, int64_t *count)
{
    int64_t launches = spk_schedule_launch_count(s);
    if (index < 0 || index >= launches)
        return spk_fail("schedule: launch %lld is outside 0..%lld", (long long)index, (long long)launches - 1);
    *first = index * s->tiles_per_launch;
    int64_t left = s->tiles - *first;
    *count = left < s->tiles_per_launch ? left : s->tiles_per_launch;
    return 0;
}

int spk_schedule_check(const spk_schedule *s, int64_t batch, const int64_t *firsts, const int64_t *counts,
                       int64_t launch_count)
{
    if (batch < 1)
        return spk_fail("schedule check: batch must be at least 1, got %lld", (long long)batch);
    if (s->tile_rows < 1 || s->tiles < 1 || s->tiles_per_launch < 1 || s->groups < 1)
        return spk_fail("schedule check: tile_rows, tiles, tiles_per_launch and groups must be positive "
                        "(got %lld, %lld, %lld, %lld)", (long long)s->tile_rows, (long long)s->tiles,
                        (long long)s->tiles_per_launch, (long long)s->groups);
    if (s->tiles * s->tile_rows < batch)
        return spk_fail("schedule check: %lld tiles of %lld rows cover %lld rows, the batch has %lld",
                        (long long)s->tiles, (long long)s->tile_rows, (long long)(s->tiles * s->tile_rows),
                        (long long)batch);
    if ((s->tiles - 1) * s->tile_rows >= batch)
        return spk_fail("schedule check: %lld tiles of %lld rows for a batch of %lld leave tile %lld empty",
                        (long long)s->tiles, (long long)s->tile_rows, (long long)batch, (long long)(s->tiles - 1));
    if (launch_count < 1)
        return spk_fail("schedule check: no launches");
    int64_t next = 0;
    for (int64_t i = 0; i < launch_count; i++) {
        if (counts[i] < 1 || counts[i] > s->tiles_per_launch)
            return spk_fail("schedule check: launch %lld has count %lld, expected 1..%lld (tiles_per_launch)",
                            (long long)i + 1, (long long)counts[i], (long long)s->tiles_per_launch);
        if (firsts[i] < next)
            return spk_fail("schedule check: launch %lld starts at tile %lld, overlapping tiles up to %lld",
                            (long long)i + 1, (long long)firsts[i], (long long)next - 1);
        if (firsts[i] > next)
            return spk_fail("schedule check: launch %lld starts at tile %lld, leaving tiles %lld..%lld uncovered",
                            (long long)i + 1, (long long)firsts[i], (long long)next, (long long)firsts[i] - 1);
        next = firsts[i] + counts[i];
        if (next > s->tiles)
            return spk_fail("schedule check: launch %lld covers tiles up to %lld, beyond the last tile %lld",
                            (long long)i + 1, (long long)next - 1, (long long)s->tiles - 1);
    }
    if (next != s->tiles)
        return spk_fail("schedule check: the launches cover tiles 0..%lld, leaving tiles %lld..%lld uncovered",
                        (long long)next - 1, (long long)next, (long long)s->tiles - 1);
    return 0;
}
