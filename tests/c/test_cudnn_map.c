/* The cuDNN backend's parts that need no GPU: the ONNX -> cuDNN parameter
 * mapping (checked by running an LSTM in cuDNN's gate order on parameters
 * fetched through the mapping, against the f64 reference), names, argument
 * checks, descriptors (cuDNN builds them without a device), status messages
 * and the no-device error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/error.h"
#include "cuda/cudnn_rnn.h"
#include "cuda/runtime.h"
#include "lstm/cudnn_stack.h"
#include "lstm/lstm.h"

TEST(onnx_gate_of_each_cudnn_gate)
{
    CHECK(spk_cudnn_onnx_gate(0) == 0); /* i <- i */
    CHECK(spk_cudnn_onnx_gate(1) == 2); /* f <- f */
    CHECK(spk_cudnn_onnx_gate(2) == 3); /* g <- c */
    CHECK(spk_cudnn_onnx_gate(3) == 1); /* o <- o */
    CHECK(spk_cudnn_onnx_gate(-1) == -1);
    CHECK(spk_cudnn_onnx_gate(4) == -1);
    /* The same from the letters: cuDNN "ifco" (its g is our c) into ONNX "iofc". */
    const char *cudnn = "ifco", *onnx = "iofc";
    for (int g = 0; g < 4; g++)
        CHECK(spk_cudnn_onnx_gate(g) == (int)(strchr(onnx, cudnn[g]) - onnx));
}

TEST(param_sources)
{
    spk_cudnn_param_source s;
    const int64_t H = 16;
    CHECK(spk_cudnn_param_source_of(5, 6, H, &s) == 0); /* layer 3 reverse, recurrent g */
    CHECK(s.layer == 2 && s.direction == 1 && s.recurrent && s.cudnn_gate == 2 && s.onnx_gate == 3);
    CHECK(s.first_row == 3 * H && s.rows == H && s.bias_offset == 4 * H + 3 * H);
    CHECK(spk_cudnn_param_source_of(0, 3, H, &s) == 0); /* layer 1 forward, input o */
    CHECK(s.layer == 0 && s.direction == 0 && !s.recurrent && s.onnx_gate == 1);
    CHECK(s.first_row == H && s.bias_offset == H);
    CHECK(spk_cudnn_param_source_of(0, 8, H, &s) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "linear layer id 8");
    CHECK(spk_cudnn_param_source_of(-1, 0, H, &s) == -1);
    CHECK(spk_cudnn_param_source_of(0, 0, 0, &s) == -1);

    /* The eight ids of a pseudo-layer take each (matrix, gate block) exactly once. */
    int seen[2][4] = {{0}};
    for (int lin = 0; lin < 8; lin++) {
        CHECK(spk_cudnn_param_source_of(2, lin, H, &s) == 0);
        seen[s.recurrent][s.onnx_gate]++;
    }
    for (int r = 0; r < 2; r++)
        for (int g = 0; g < 4; g++)
            CHECK(seen[r][g] == 1);
}

static double sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }

/* A bidirectional stack in cuDNN's terms: per pseudo-layer, matrices and
 * biases indexed by linear layer id (0-3 input, 4-7 recurrent; gates i, f, g,
 * o), filled through spk_cudnn_param_source_of as the plan fills cuDNN's
 * weight space. Returns y [B, T, 2H] in f64. */
static double *cudnn_order_forward(const spk_lstm_layer *layers, int L, const spk_tensor *x, int64_t H)
{
    const int64_t B = x->shape[0], T = x->shape[1];
    double *in = malloc(sizeof(double) * (size_t)(B * T * x->shape[2]));
    for (int64_t i = 0; i < B * T * x->shape[2]; i++)
        in[i] = spk_tensor_flat_get(x, i);
    int64_t width = x->shape[2];
    for (int l = 0; l < L; l++) {
        double *out = calloc((size_t)(B * T * 2 * H), sizeof(double));
        for (int d = 0; d < 2; d++) {
            /* mats[lin] is H x cols, bias[lin] is H, as cuDNN hands them out. */
            double *mats[8], *bias[8];
            for (int lin = 0; lin < 8; lin++) {
                spk_cudnn_param_source s;
                spk_cudnn_param_source_of(2 * l + d, lin, H, &s);
                const spk_tensor *M = s.recurrent ? layers[s.layer].R : layers[s.layer].W;
                int64_t cols = M->shape[2];
                mats[lin] = malloc(sizeof(double) * (size_t)(H * cols));
                bias[lin] = malloc(sizeof(double) * (size_t)H);
                for (int64_t r = 0; r < H; r++) {
                    for (int64_t c = 0; c < cols; c++) {
                        int64_t idx[3] = {s.direction, s.first_row + r, c};
                        mats[lin][r * cols + c] = spk_tensor_get_f64(M, idx);
                    }
                    int64_t bidx[2] = {s.direction, s.bias_offset + r};
                    bias[lin][r] = spk_tensor_get_f64(layers[s.layer].B, bidx);
                }
            }
            for (int64_t b = 0; b < B; b++) {
                double *h = calloc((size_t)H, sizeof(double)), *c = calloc((size_t)H, sizeof(double));
                double *hn = calloc((size_t)H, sizeof(double));
                for (int64_t k = 0; k < T; k++) {
                    int64_t t = d == 0 ? k : T - 1 - k;
                    const double *xt = in + (b * T + t) * width;
                    for (int64_t u = 0; u < H; u++) {
                        double pre[4];
                        for (int g = 0; g < 4; g++) {
                            double v = bias[g][u] + bias[4 + g][u];
                            for (int64_t j = 0; j < width; j++)
                                v += mats[g][u * width + j] * xt[j];
                            for (int64_t j = 0; j < H; j++)
                                v += mats[4 + g][u * H + j] * h[j];
                            pre[g] = v;
                        }
                        /* cuDNN: i, f, g, o */
                        double gi = sigmoid(pre[0]), gf = sigmoid(pre[1]), gg = tanh(pre[2]), go = sigmoid(pre[3]);
                        c[u] = gf * c[u] + gi * gg;
                        hn[u] = go * tanh(c[u]);
                    }
                    memcpy(h, hn, sizeof(double) * (size_t)H);
                    memcpy(out + (b * T + t) * 2 * H + d * H, h, sizeof(double) * (size_t)H);
                }
                free(h);
                free(c);
                free(hn);
            }
            for (int lin = 0; lin < 8; lin++) {
                free(mats[lin]);
                free(bias[lin]);
            }
        }
        free(in);
        in = out;
        width = 2 * H;
    }
    return in;
}

TEST(mapping_reproduces_the_onnx_reference)
{
    const int L = 2;
    const int64_t B = 2, T = 5, IN = 3, H = 4;
    spk_lstm_weights w[2];
    /* Scale 3 saturates some gates, so a swapped gate would show. */
    CHECK(spk_lstm_random(L, IN, H, 7, 3.0, SPK_F32, w) == 0);
    spk_lstm_layer layers[2];
    for (int l = 0; l < L; l++)
        layers[l] = (spk_lstm_layer){w[l].W, w[l].R, w[l].B};
    const int64_t xs[3] = {B, T, IN};
    spk_tensor *x = spk_tensor_new(SPK_F32, 3, xs);
    for (int64_t i = 0; i < B * T * IN; i++) {
        int64_t idx[3] = {i / (T * IN), (i / IN) % T, i % IN};
        spk_tensor_set_f64(x, idx, sin(0.7 * (double)i) * 2.0);
    }
    spk_lstm_reference_options opt = spk_lstm_reference_defaults();
    spk_lstm_reference_result ref;
    CHECK(spk_lstm_reference(layers, L, x, &opt, &ref) == 0);
    double *y = cudnn_order_forward(layers, L, x, H);
    double worst = 0, norm = 0;
    for (int64_t i = 0; i < B * T * 2 * H; i++) {
        double r = spk_tensor_flat_get(ref.y, i);
        worst = fmax(worst, fabs(y[i] - r));
        norm = fmax(norm, fabs(r));
    }
    CHECK(norm > 0.1);       /* the comparison is not between zeros */
    CHECK(worst < 1e-12);
    free(y);
    spk_lstm_reference_result_free(&ref);
    spk_tensor_free(x);
    for (int l = 0; l < L; l++)
        spk_lstm_weights_free(&w[l]);
}

TEST(names)
{
    spk_cudnn_algo a;
    CHECK(spk_cudnn_algo_from_name("persist_static_small_h", &a) == 0 && a == SPK_CUDNN_PERSIST_STATIC_SMALL_H);
    CHECK(spk_cudnn_algo_from_name("persist_dynamic", &a) == 0 && a == SPK_CUDNN_PERSIST_DYNAMIC);
    for (int i = 0; i < SPK_CUDNN_ALGO_COUNT; i++) {
        CHECK(spk_cudnn_algo_from_name(spk_cudnn_algo_name((spk_cudnn_algo)i), &a) == 0);
        CHECK((int)a == i);
    }
    CHECK(spk_cudnn_algo_from_name("fastest", &a) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "unknown cuDNN algorithm 'fastest'");
    CHECK_STR_CONTAINS(spk_last_error(), "persist_static_small_h");
    spk_cudnn_layout lay;
    CHECK(spk_cudnn_layout_from_name("seq_major", &lay) == 0 && lay == SPK_CUDNN_SEQ_MAJOR);
    CHECK(spk_cudnn_layout_from_name("packed", &lay) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "unknown cuDNN layout 'packed' (expected batch_major, seq_major)");
    spk_cudnn_math m;
    CHECK(spk_cudnn_math_from_name("tf32", &m) == 0 && m == SPK_CUDNN_MATH_TF32);
    CHECK(spk_cudnn_math_from_name("fp16", &m) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "unknown cuDNN math mode 'fp16'");
}

TEST(status_messages)
{
    CHECK(spk_cudnn_check(CUDNN_STATUS_SUCCESS, "cudnnRNNForward") == 0);
    CHECK(spk_cudnn_check(CUDNN_STATUS_NOT_SUPPORTED, "cudnnRNNForward") == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "cudnnRNNForward: CUDNN_STATUS_NOT_SUPPORTED");
    /* A real refusal, which needs no device: sequence longer than maxSeqLength. */
    cudnnRNNDataDescriptor_t d;
    CHECK(cudnnCreateRNNDataDescriptor(&d) == CUDNN_STATUS_SUCCESS);
    int lengths[2] = {5, 9};
    float fill = 0;
    cudnnStatus_t st = cudnnSetRNNDataDescriptor(d, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, 5,
                                                 2, 3, lengths, &fill);
    CHECK(spk_cudnn_check(st, "cudnnSetRNNDataDescriptor") == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "cudnnSetRNNDataDescriptor: CUDNN_STATUS_BAD_PARAM");
    cudnnDestroyRNNDataDescriptor(d);
}

/* One random stack of `count` layers; layers[] borrow from w[]. */
static void random_stack(int count, int64_t in, int64_t hidden, spk_lstm_weights *w, spk_lstm_layer *layers)
{
    spk_lstm_random(count, in, hidden, 1, 1.0, SPK_F32, w);
    for (int l = 0; l < count; l++)
        layers[l] = (spk_lstm_layer){w[l].W, w[l].R, w[l].B};
}

static void free_stack(int count, spk_lstm_weights *w)
{
    for (int l = 0; l < count; l++)
        spk_lstm_weights_free(&w[l]);
}

TEST(checks_before_any_device)
{
    spk_lstm_weights w[4];
    spk_lstm_layer layers[4];
    random_stack(4, 60, 128, w, layers);
    spk_cudnn_stack_options o = spk_cudnn_stack_defaults();
    CHECK(o.algo == SPK_CUDNN_STANDARD && o.layout == SPK_CUDNN_BATCH_MAJOR && o.math == SPK_CUDNN_MATH_FP32);
    spk_lstm_dims dims;
    /* cuDNN accepts the pyannote stack's descriptors for every algorithm, layout and math mode. */
    for (int a = 0; a < SPK_CUDNN_ALGO_COUNT; a++)
        for (int lay = 0; lay < 2; lay++)
            for (int m = 0; m < 2; m++) {
                o.algo = (spk_cudnn_algo)a;
                o.layout = (spk_cudnn_layout)lay;
                o.math = (spk_cudnn_math)m;
                o.batch = 32;
                int rc = spk_cudnn_stack_check(layers, 4, &o, &dims);
                CHECK(rc == 0);
                if (rc)
                    fprintf(stderr, "  %s\n", spk_last_error());
            }
    CHECK(dims.layers == 4 && dims.hidden == 128 && dims.input == 60);

    o = spk_cudnn_stack_defaults();
    o.batch = 0;
    CHECK(spk_cudnn_stack_check(layers, 4, &o, NULL) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "batch must be at least 1, got 0");
    CHECK(spk_cudnn_stack_new(layers, 4, &o) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "batch must be at least 1");
    o = spk_cudnn_stack_defaults();
    o.steps = -3;
    CHECK(spk_cudnn_stack_check(layers, 4, &o, NULL) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "steps must be at least 1, got -3");
    o = spk_cudnn_stack_defaults();
    o.algo = (spk_cudnn_algo)9;
    CHECK(spk_cudnn_stack_check(layers, 4, &o, NULL) == -1);
    o = spk_cudnn_stack_defaults();
    o.batch = 1 << 20;
    o.steps = 1 << 20;
    CHECK(spk_cudnn_stack_check(layers, 4, &o, NULL) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "32-bit");

    /* Layer 2 from a stack of another hidden size. */
    spk_lstm_weights other[2];
    spk_lstm_layer other_layers[2];
    random_stack(2, 60, 64, other, other_layers);
    spk_lstm_layer mixed[2] = {layers[0], other_layers[1]};
    o = spk_cudnn_stack_defaults();
    CHECK(spk_cudnn_stack_new(mixed, 2, &o) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "layer 2: W has shape [2, 256, 128], expected [2, 512, 256]");
    free_stack(2, other);
    free_stack(4, w);
}

TEST(without_a_device)
{
    if (spk_cuda_available())
        return; /* the GPU suite covers plans on a device */
    spk_lstm_weights w[2];
    spk_lstm_layer layers[2];
    random_stack(2, 10, 16, w, layers);
    spk_cudnn_stack_options o = spk_cudnn_stack_defaults();
    o.batch = 3;
    o.steps = 7;
    CHECK(spk_cudnn_stack_new(layers, 2, &o) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "spk.cuda: no CUDA device");
    spk_cudnn_algo_result results[SPK_CUDNN_ALGO_COUNT];
    CHECK(spk_cudnn_algorithms(layers, 2, &o, results) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "spk.cuda: no CUDA device");
    cudnnHandle_t h;
    CHECK(spk_cudnn_handle(NULL, &h) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "spk.cuda: no CUDA device");
    /* cuDNN itself cannot make a handle without a device. */
    cudnnHandle_t raw = NULL;
    CHECK(cudnnCreate(&raw) != CUDNN_STATUS_SUCCESS);
    free_stack(2, w);
}

TEST(versions)
{
    CHECK(spk_cudnn_header_version() >= 90000);
    CHECK(spk_cudnn_version() / 10000 == 9);
}

int main(void)
{
    RUN(onnx_gate_of_each_cudnn_gate);
    RUN(param_sources);
    RUN(mapping_reproduces_the_onnx_reference);
    RUN(names);
    RUN(status_messages);
    RUN(checks_before_any_device);
    RUN(without_a_device);
    RUN(versions);
    return CHECK_SUMMARY();
}
