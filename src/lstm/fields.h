/* Named values (an integer, a boolean or a text each) that C reports and a
 * binding pushes as a table without knowing their struct: a family's plan
 * information (family.h), a schedule's fields. Texts are static. */
#ifndef SPK_LSTM_FIELDS_H
#define SPK_LSTM_FIELDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lstm/kernel_options.h"
#include "lstm/lstm.h"

#define SPK_FIELDS_MAX 40
typedef enum spk_field_kind { SPK_FIELD_INT, SPK_FIELD_BOOL, SPK_FIELD_TEXT } spk_field_kind;
typedef struct spk_field {
    const char *name;
    spk_field_kind kind;
    int64_t value;
    const char *text;
} spk_field;
typedef struct spk_fields {
    int count;
    spk_field at[SPK_FIELDS_MAX];
} spk_fields;
void spk_fields_int(spk_fields *f, const char *name, int64_t value);
void spk_fields_bool(spk_fields *f, const char *name, bool value);
void spk_fields_text(spk_fields *f, const char *name, const char *text);
/* A variant's options by name (a word option as its word; the options'
 * table order). */
void spk_fields_options(spk_fields *f, const spk_kernel_family *options, const void *variant);

/* A struct's int64_t members by their names: {"tiles", offsetof(T, tiles)}. */
typedef struct spk_field_member {
    const char *name;
    size_t offset;
} spk_field_member;
#define SPK_FIELD_MEMBER(type, member) {#member, offsetof(type, member)}
void spk_fields_members(spk_fields *f, const void *object, const spk_field_member *members, int count);

/* A tile schedule's fields (batch, tile_rows, tiles, tiles_per_launch,
 * concurrent, groups): what spk.schedule.new returns and plan.schedule shows. */
void spk_schedule_fields(const spk_schedule *s, spk_fields *out);

#endif
