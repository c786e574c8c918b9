/* Named values: see fields.h. */
#include "lstm/fields.h"

#include <string.h>

static spk_field *next_field(spk_fields *f, const char *name, spk_field_kind kind)
{
    static spk_field spare; /* past SPK_FIELDS_MAX: dropped (a family's table bug, caught by its spec) */
    if (f->count >= SPK_FIELDS_MAX)
        return &spare;
    spk_field *x = &f->at[f->count++];
    *x = (spk_field){.name = name, .kind = kind};
    return x;
}

void spk_fields_int(spk_fields *f, const char *name, int64_t value) { next_field(f, name, SPK_FIELD_INT)->value = value; }

void spk_fields_bool(spk_fields *f, const char *name, bool value)
{
    next_field(f, name, SPK_FIELD_BOOL)->value = value;
}

void spk_fields_text(spk_fields *f, const char *name, const char *text)
{
    next_field(f, name, SPK_FIELD_TEXT)->text = text;
}

void spk_fields_options(spk_fields *f, const spk_kernel_family *options, const void *variant)
{
    for (int i = 0; i < options->count; i++) {
        const spk_kernel_option *o = &options->options[i];
        int value = spk_kernel_option_get(o, variant);
        const char *word = spk_kernel_option_word(o, value);
        if (word)
            spk_fields_text(f, o->name, word);
        else
            spk_fields_int(f, o->name, value);
    }
}

void spk_fields_members(spk_fields *f, const void *object, const spk_field_member *members, int count)
{
    for (int i = 0; i < count; i++) {
        int64_t value;
        memcpy(&value, (const char *)object + members[i].offset, sizeof value);
        spk_fields_int(f, members[i].name, value);
    }
}

#define MEMBER(name) SPK_FIELD_MEMBER(spk_schedule, name)
static const spk_field_member schedule_members[] = {MEMBER(batch), MEMBER(groups), MEMBER(tile_rows), MEMBER(tiles),
                                                    MEMBER(tiles_per_launch)};
#undef MEMBER

void spk_schedule_fields(const spk_schedule *s, spk_fields *out)
{
    spk_fields_members(out, s, schedule_members, (int)(sizeof schedule_members / sizeof *schedule_members));
    spk_fields_bool(out, "concurrent", s->concurrent);
}
