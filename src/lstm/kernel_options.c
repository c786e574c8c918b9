/* Kernel options as data: see kernel_options.h. */
#include "lstm/kernel_options.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

static bool is_word_option(const spk_kernel_option *o) { return o->words[0] != NULL; }

static int word_count(const spk_kernel_option *o)
{
    int n = 0;
    while (n < SPK_OPTION_WORDS && o->words[n])
        n++;
    return n;
}

static bool allowed(const spk_kernel_option *o, long long v)
{
    if (is_word_option(o))
        return v >= 0 && v < word_count(o);
    if (v < o->min || v > o->max)
        return false;
    return o->allowed == 0 || (v >= 0 && v < 64 && (o->allowed & SPK_BIT(v)));
}

int spk_kernel_option_get(const spk_kernel_option *o, const void *variant)
{
    int v;
    memcpy(&v, (const char *)variant + o->offset, sizeof v);
    return v;
}

void spk_kernel_option_set(const spk_kernel_option *o, void *variant, int value)
{
    memcpy((char *)variant + o->offset, &value, sizeof value);
}

const char *spk_kernel_option_word(const spk_kernel_option *o, int value)
{
    return is_word_option(o) && value >= 0 && value < word_count(o) ? o->words[value] : NULL;
}

void spk_kernel_option_values(const spk_kernel_option *o, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
#define APPEND(...) (n += (size_t)snprintf(out + (n < size ? n : size), n < size ? size - n : 0, __VA_ARGS__))
    if (is_word_option(o)) {
        int words = word_count(o);
        for (int i = 0; i < words; i++)
            APPEND("%s\"%s\"", i == 0 ? "" : i + 1 == words ? " or " : ", ", o->words[i]);
    } else if (o->allowed == 0) {
        APPEND("%d .. %d", o->min, o->max);
    } else {
        int count = 0, total = 0;
        for (int v = o->min; v <= o->max && v < 64; v++)
            total += allowed(o, v);
        for (int v = o->min; v <= o->max && v < 64; v++)
            if (allowed(o, v)) {
                count++;
                APPEND("%s%d", count == 1 ? "" : count == total ? " or " : ", ", v);
            }
    }
#undef APPEND
}

int spk_kernel_option_index(const spk_kernel_family *f, const char *name)
{
    for (int i = 0; i < f->count; i++)
        if (strcmp(f->options[i].name, name) == 0)
            return i;
    char names[512];
    size_t n = 0;
    names[0] = '\0';
    for (int i = 0; i < f->count && n < sizeof names; i++)
        n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", f->options[i].name);
    return spk_fail("kernel: unknown option '%s' (known: %s)", name, names);
}

int spk_kernel_option_refuse(const spk_kernel_option *o, const char *got)
{
    char values[160];
    spk_kernel_option_values(o, values, sizeof values);
    return spk_fail("kernel.%s must be %s (%s), got %s", o->name, values, o->help, got);
}

int spk_kernel_choice_set_int(const spk_kernel_family *f, spk_kernel_choice *c, int option, long long value)
{
    const spk_kernel_option *o = &f->options[option];
    if (is_word_option(o) || !allowed(o, value)) {
        char got[32];
        snprintf(got, sizeof got, "%lld", value);
        return spk_kernel_option_refuse(o, got);
    }
    c->given |= 1u << option;
    c->values[option] = (int)value;
    return 0;
}

int spk_kernel_choice_set_word(const spk_kernel_family *f, spk_kernel_choice *c, int option, const char *word)
{
    const spk_kernel_option *o = &f->options[option];
    for (int i = 0; is_word_option(o) && i < word_count(o); i++)
        if (strcmp(o->words[i], word) == 0) {
            c->given |= 1u << option;
            c->values[option] = i;
            return 0;
        }
    char got[80];
    snprintf(got, sizeof got, "\"%.60s\"", word);
    return spk_kernel_option_refuse(o, got);
}

/* The index of option `name` (the tables are written with their own names: a miss is a table bug). */
static int index_of(const spk_kernel_family *f, const char *name)
{
    for (int i = 0; i < f->count; i++)
        if (strcmp(f->options[i].name, name) == 0)
            return i;
    return -1;
}

static bool in_set(uint64_t set, int value) { return value >= 0 && value < 64 && (set & SPK_BIT(value)); }

/* Does `value` of option i break a rule together with an option the script gave? */
static bool conflicts(const spk_kernel_family *f, const spk_kernel_choice *given, int i, int value)
{
    for (int r = 0; r < f->nrules; r++) {
        const spk_kernel_rule *rule = &f->rules[r];
        int a = index_of(f, rule->option), b = index_of(f, rule->other);
        if (a == i && b >= 0 && (given->given & (1u << b)) && in_set(rule->when, value) &&
            !in_set(rule->needs, given->values[b]))
            return true;
        if (b == i && a >= 0 && (given->given & (1u << a)) && in_set(rule->when, given->values[a]) &&
            !in_set(rule->needs, value))
            return true;
    }
    return false;
}

void spk_kernel_resolve(const spk_kernel_family *f, const void *row, const spk_kernel_choice *given, void *out)
{
    for (int i = 0; i < f->count; i++) {
        const spk_kernel_option *o = &f->options[i];
        int value = spk_kernel_option_get(o, row);
        if (given->given & (1u << i)) {
            value = given->values[i];
        } else if (o->from == SPK_DEFAULT_BATCH && conflicts(f, given, i, value)) {
            value = o->fallback;
            for (int v = is_word_option(o) ? 0 : o->min; conflicts(f, given, i, value) && v <= (is_word_option(o)
                 ? word_count(o) - 1 : o->max); v++)
                if (allowed(o, v))
                    value = v;
        }
        spk_kernel_option_set(o, out, value);
    }
    /* a derived size keeps the row's value only while what it follows does */
    for (int i = 0; i < f->count; i++) {
        const spk_kernel_option *o = &f->options[i];
        if (o->from != SPK_DEFAULT_FIT || (given->given & (1u << i)))
            continue;
        for (int j = 0; j < f->count; j++)
            if ((o->follows & (1u << j)) &&
                spk_kernel_option_get(&f->options[j], out) != spk_kernel_option_get(&f->options[j], row)) {
                spk_kernel_option_set(o, out, 0);
                break;
            }
    }
}

int spk_kernel_check_rules(const spk_kernel_family *f, const void *variant)
{
    for (int i = 0; i < f->count; i++) {
        const spk_kernel_option *o = &f->options[i];
        int v = spk_kernel_option_get(o, variant);
        if (o->from != SPK_DEFAULT_LAYERS && !allowed(o, v)) {
            char got[32];
            snprintf(got, sizeof got, "%d", v);
            return spk_kernel_option_refuse(o, got);
        }
    }
    for (int r = 0; r < f->nrules; r++) {
        const spk_kernel_rule *rule = &f->rules[r];
        int a = index_of(f, rule->option), b = index_of(f, rule->other);
        if (a < 0 || b < 0)
            return spk_fail("kernel options of backend %s: a rule names an unknown option", f->backend);
        if (in_set(rule->when, spk_kernel_option_get(&f->options[a], variant)) &&
            !in_set(rule->needs, spk_kernel_option_get(&f->options[b], variant)))
            return spk_fail("%s", rule->message);
    }
    return 0;
}

int spk_kernel_defines(const spk_kernel_family *f, const void *variant, spk_define *out, char text[][16])
{
    int n = 0;
    for (int i = 0; i < f->count; i++) {
        const spk_kernel_option *o = &f->options[i];
        if (!o->macro)
            continue;
        snprintf(text[n], 16, "%d", spk_kernel_option_get(o, variant));
        out[n].name = o->macro;
        out[n].value = text[n];
        n++;
    }
    return n;
}

int spk_kernel_family_describe(const spk_kernel_family *f, char *out, size_t size)
{
    size_t n = 0;
    if (size > 0)
        out[0] = '\0';
#define APPEND(...) (n += (size_t)snprintf(out ? out + (n < size ? n : size) : NULL, n < size ? size - n : 0, __VA_ARGS__))
    for (int i = 0; i < f->count; i++) {
        const spk_kernel_option *o = &f->options[i];
        char values[160];
        spk_kernel_option_values(o, values, sizeof values);
        const char *from = o->from == SPK_DEFAULT_LAYERS  ? "the layers' size"
                           : o->from == SPK_DEFAULT_BATCH ? "the batch's default"
                                                          : "fitted to the others";
        if (o->from == SPK_DEFAULT_LAYERS)
            APPEND("  %-14s left out: %s\n", o->name, from);
        else
            APPEND("  %-14s %s; left out: %s\n", o->name, values, from);
        APPEND("  %-14s %s\n", "", o->help);
    }
    for (int r = 0; r < f->nrules; r++)
        APPEND("  rule: %s\n", f->rules[r].message);
#undef APPEND
    return (int)n;
}
