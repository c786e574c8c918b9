/* The projection math of the GPU stack plans: FP32 and TF32 accepted, any
 * other mode refused with a message naming both, before any device work
 * (so these run without a GPU). */
#include "check.h"
#include "core/error.h"
#include "lstm/cluster.h"
#include "lstm/stack_plan.h"
#include "lstm/device_layers.h"
#include "lstm/persistent.h"

/* One layer of zeros, H = 128, input 4 (f32 host tensors). */
typedef struct zero_layer {
    spk_tensor *W, *R, *B;
    spk_lstm_layer layer;
} zero_layer;

static void zero_layer_new(zero_layer *z)
{
    int64_t ws[3] = {2, 512, 4}, rs[3] = {2, 512, 128}, bs[2] = {2, 1024};
    z->W = spk_tensor_new(SPK_F32, 3, ws);
    z->R = spk_tensor_new(SPK_F32, 3, rs);
    z->B = spk_tensor_new(SPK_F32, 2, bs);
    z->layer = (spk_lstm_layer){z->W, z->R, z->B};
}

static void zero_layer_free(zero_layer *z)
{
    spk_tensor_free(z->W);
    spk_tensor_free(z->R);
    spk_tensor_free(z->B);
}

TEST(fp32_tf32_and_3xtf32_are_the_modes)
{
    CHECK(spk_lstm_check_math(SPK_MATH_FP32) == 0);
    CHECK(spk_lstm_check_math(SPK_MATH_TF32) == 0);
    CHECK(spk_lstm_check_math(SPK_MATH_3XTF32) == 0);
    CHECK(spk_lstm_check_math(SPK_MATH_PEDANTIC) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "math must be \"fp32\", \"tf32\" or \"3xtf32\"");
    CHECK_STR_CONTAINS(spk_last_error(), "pedantic");
    CHECK(spk_lstm_check_math((spk_math_mode)7) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "mode 7");
    CHECK(strcmp(spk_lstm_math_name(SPK_MATH_FP32), "fp32") == 0);
    CHECK(strcmp(spk_lstm_math_name(SPK_MATH_TF32), "tf32") == 0);
    CHECK(strcmp(spk_lstm_math_name(SPK_MATH_3XTF32), "3xtf32") == 0);
    CHECK(strcmp(spk_lstm_math_suffix(SPK_MATH_FP32), "") == 0);
    CHECK(strcmp(spk_lstm_math_suffix(SPK_MATH_3XTF32), ", 3xtf32 projections") == 0);
}

TEST(persistent_plan_refuses_other_math_before_the_device)
{
    zero_layer z;
    zero_layer_new(&z);
    spk_stack_plan_options o = {.family = &spk_persistent_kernels};
    o.layers = &z.layer;
    o.count = 1;
    o.batch = 2;
    o.steps = 3;
    o.math = SPK_MATH_PEDANTIC;
    CHECK(spk_stack_plan_new(&o) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "math must be \"fp32\", \"tf32\" or \"3xtf32\"");
    zero_layer_free(&z);
}

TEST(cluster_plan_refuses_other_math_before_the_device)
{
    zero_layer z;
    zero_layer_new(&z);
    spk_stack_plan_options o = {.family = &spk_cluster_kernels};
    o.layers = &z.layer;
    o.count = 1;
    o.batch = 2;
    o.steps = 3;
    o.math = (spk_math_mode)5;
    CHECK(spk_stack_plan_new(&o) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "math must be \"fp32\", \"tf32\" or \"3xtf32\"");
    zero_layer_free(&z);
}

int main(void)
{
    RUN(fp32_tf32_and_3xtf32_are_the_modes);
    RUN(persistent_plan_refuses_other_math_before_the_device);
    RUN(cluster_plan_refuses_other_math_before_the_device);
    return CHECK_SUMMARY();
}
