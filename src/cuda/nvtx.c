/* NVTX ranges in the domain "spk" (nvtx.h says what and why). */
#include "cuda/nvtx.h"

#include "core/error.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_bool enabled;
static nvtxDomainHandle_t domain; /* created under count_lock when ranges are first on */

static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;
static char names[SPK_NVTX_NAMES][64];
static long counts[SPK_NVTX_NAMES + 1]; /* the last: every other name */
static int named;
static int depth;

static void start(void)
{
    const char *env = getenv("SPK_NVTX");
    bool on = !(env && strcmp(env, "0") == 0);
    if (on)
        domain = nvtxDomainCreateA("spk");
    atomic_store(&enabled, on);
}

bool spk_nvtx_enabled(void)
{
    pthread_once(&once, start);
    return atomic_load_explicit(&enabled, memory_order_acquire);
}

static void count(const char *name)
{
    pthread_mutex_lock(&count_lock);
    int i = 0;
    while (i < named && strcmp(names[i], name) != 0)
        i++;
    if (i == named && named < SPK_NVTX_NAMES)
        snprintf(names[named++], sizeof names[0], "%s", name);
    counts[i < named ? i : SPK_NVTX_NAMES]++;
    depth++;
    pthread_mutex_unlock(&count_lock);
}

void spk_nvtx_push(const char *name)
{
    if (!spk_nvtx_enabled())
        return;
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(domain, &a);
    count(name);
}

void spk_nvtx_pushf(const char *fmt, ...)
{
    if (!spk_nvtx_enabled())
        return;
    char name[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    spk_nvtx_push(name);
}

void spk_nvtx_pop(void)
{
    if (!spk_nvtx_enabled())
        return;
    nvtxDomainRangePop(domain);
    pthread_mutex_lock(&count_lock);
    depth--;
    pthread_mutex_unlock(&count_lock);
}

int spk_nvtx_set_enabled(bool on)
{
    bool was = spk_nvtx_enabled();
    pthread_mutex_lock(&count_lock);
    if (depth != 0) {
        int open = depth;
        pthread_mutex_unlock(&count_lock);
        return spk_fail("NVTX ranges cannot be turned %s while %d %s open (every push is popped first)",
                        on ? "on" : "off", open, open == 1 ? "is" : "are");
    }
    if (on && !domain)
        domain = nvtxDomainCreateA("spk");
    atomic_store(&enabled, on);
    pthread_mutex_unlock(&count_lock);
    return was;
}

int spk_nvtx_count(int i, const char **name, long *n)
{
    pthread_mutex_lock(&count_lock);
    int found = 0;
    if (i >= 0 && i < named) {
        *name = names[i];
        *n = counts[i];
        found = 1;
    } else if (i == named && counts[SPK_NVTX_NAMES] > 0) {
        *name = "(other names)";
        *n = counts[SPK_NVTX_NAMES];
        found = 1;
    }
    pthread_mutex_unlock(&count_lock);
    return found ? 0 : -1;
}

int spk_nvtx_depth(void)
{
    pthread_mutex_lock(&count_lock);
    int d = depth;
    pthread_mutex_unlock(&count_lock);
    return d;
}

void spk_nvtx_reset_counts(void)
{
    pthread_mutex_lock(&count_lock);
    named = 0;
    memset(counts, 0, sizeof counts);
    pthread_mutex_unlock(&count_lock);
}
