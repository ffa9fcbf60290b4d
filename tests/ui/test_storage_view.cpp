// The storage view and the quantization error behind it: the error map and statistics against a direct
// quantize/dequantize of each row, the grid reduction keeping each bucket's largest error, clear errors, and the
// view on the demonstration model (a float weight quantized on the fly) and on a quantized copy of it compared
// with its original.
#include <cmath>
#include <random>

#include <QSignalSpy>
#include <QStandardPaths>

#include "catch.hpp"
#include "explorer/main_window.hpp"
#include "strata/error.hpp"
#include "strata/model.hpp"
#include "strata/quant.hpp"
#include "strata/quantize.hpp"
#include "ui_support.hpp"
#include "views/heatmap_widget.hpp"
#include "views/storage_view.hpp"
#include "worker/quant_error.hpp"

using namespace strata;
using namespace strata::ui;
using strata::test::wait_until;

namespace {

struct Owned {
    std::vector<std::byte> bytes;
    strata::TensorView view;
};

Owned f32_weight(const std::vector<float>& v, int64_t rows, int64_t cols) {
    Owned o;
    o.bytes.resize(v.size() * 4);
    std::memcpy(o.bytes.data(), v.data(), o.bytes.size());
    o.view.name = "w";
    o.view.dtype = DType::F32;
    o.view.shape = {rows, cols};
    o.view.data = o.bytes.data();
    o.view.nbytes = o.bytes.size();
    return o;
}

Owned quantized_weight(const std::vector<float>& v, int64_t rows, int64_t cols, DType t) {
    Owned o;
    const uint64_t row_bytes = dtype_bytes(t, cols);
    o.bytes.resize(size_t(row_bytes * uint64_t(rows)));
    for (int64_t r = 0; r < rows; ++r) quant::quantize(t, v.data() + r * cols, o.bytes.data() + r * row_bytes, cols);
    o.view.name = "w";
    o.view.dtype = t;
    o.view.shape = {rows, cols};
    o.view.data = o.bytes.data();
    o.view.nbytes = o.bytes.size();
    return o;
}

std::vector<float> randn(int64_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 0.02f);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = d(rng);
    v[size_t(n / 3)] = 0.5f;  // an outlier: its block's scale grows, so its neighbours lose precision
    return v;
}

// The error of every weight, straight from quantize + dequantize.
std::vector<float> direct_error(const std::vector<float>& v, int64_t rows, int64_t cols, DType t) {
    std::vector<float> err(v.size()), back(static_cast<size_t>(cols));
    std::vector<std::byte> blocks(size_t(dtype_bytes(t, cols)));
    for (int64_t r = 0; r < rows; ++r) {
        quant::quantize(t, v.data() + r * cols, blocks.data(), cols);
        quant::dequantize(t, blocks.data(), back.data(), cols);
        for (int64_t c = 0; c < cols; ++c) err[size_t(r * cols + c)] = back[size_t(c)] - v[size_t(r * cols + c)];
    }
    return err;
}

}  // namespace

TEST_CASE("the quantization error map is each weight's dequantized minus original value", "[storage]") {
    const int64_t R = 7, C = 512;
    const std::vector<float> v = randn(R * C, 3);
    const Owned w = f32_weight(v, R, C);
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
        INFO(dtype_name(t));
        const std::vector<float> err = direct_error(v, R, C, t);
        // Full resolution: the map is the error itself.
        const QuantError e = quantization_error(w.view, nullptr, t, R, C);
        REQUIRE(e.grid_rows == R);
        REQUIRE(e.grid_cols == C);
        CHECK(e.cells == err);
        double e2 = 0, o2 = 0, worst = 0;
        for (size_t i = 0; i < v.size(); ++i) {
            e2 += double(err[i]) * err[i];
            o2 += double(v[i]) * v[i];
            worst = std::max(worst, std::abs(double(err[i])));
        }
        CHECK(e.rel_l2 == Approx(std::sqrt(e2 / o2)).epsilon(1e-9));
        CHECK(e.max_abs == Approx(worst).epsilon(1e-9));
        CHECK(std::abs(err[size_t(e.max_row * C + e.max_col)]) == float(worst));
        CHECK(e.snr_db() > 10.0);
        // Reduced to 3 x 10 cells: buckets of 3 rows x 52 columns, each keeping its largest |error| with its sign.
        const QuantError g = quantization_error(w.view, nullptr, t, 3, 10);
        REQUIRE(g.row_step == 3);
        REQUIRE(g.col_step == 52);
        REQUIRE(g.grid_rows == 3);
        REQUIRE(g.grid_cols == 10);
        for (int64_t gr = 0; gr < g.grid_rows; ++gr)
            for (int64_t gc = 0; gc < g.grid_cols; ++gc) {
                float want = 0;
                for (int64_t r = gr * 3; r < std::min(R, gr * 3 + 3); ++r)
                    for (int64_t c = gc * 52; c < std::min(C, gc * 52 + 52); ++c)
                        if (std::abs(err[size_t(r * C + c)]) > std::abs(want)) want = err[size_t(r * C + c)];
                CHECK(g.cells[size_t(gr * 10 + gc)] == want);
            }
        // A quantized weight against its original gives the same map.
        const Owned q = quantized_weight(v, R, C, t);
        const QuantError o = quantization_error(q.view, &w.view, DType::F32, R, C);
        CHECK(o.cells == err);
        CHECK(o.approx_type == t);
        CHECK(o.original_type == DType::F32);
    }
    // Fewer bits, more error: Q8_0 < Q6_K < Q5_K < Q4_K on the same weight.
    auto rel = [&](DType t) { return quantization_error(w.view, nullptr, t, 1, 1).rel_l2; };
    CHECK(rel(DType::Q8_0) < rel(DType::Q6_K));
    CHECK(rel(DType::Q6_K) < rel(DType::Q5_K));
    CHECK(rel(DType::Q5_K) < rel(DType::Q4_K));
}

TEST_CASE("the quantization error says clearly what cannot be compared", "[storage]") {
    const std::vector<float> v = randn(4 * 96, 5);
    const Owned w = f32_weight(v, 4, 96);
    CHECK_THROWS_AS(quantization_error(w.view, nullptr, DType::Q4_K, 8, 8), InputError);  // 96 is not 256-blocks
    CHECK_THROWS_AS(quantization_error(w.view, nullptr, DType::BF16, 8, 8), InputError);  // not a block type
    const Owned q = quantized_weight(v, 4, 96, DType::Q8_0);
    CHECK_THROWS_AS(quantization_error(q.view, nullptr, DType::Q4_0, 8, 8), InputError);  // quantized, no original
    CHECK_THROWS_AS(quantization_error(q.view, &q.view, DType::F32, 8, 8), InputError);  // original quantized too
    const Owned other = f32_weight(std::vector<float>(v.begin(), v.begin() + 3 * 96), 3, 96);
    CHECK_THROWS_AS(quantization_error(q.view, &other.view, DType::F32, 8, 8), InputError);  // shapes differ
    std::atomic<bool> cancel{true};
    CHECK_THROWS_AS(quantization_error(w.view, nullptr, DType::Q8_0, 8, 8, &cancel), Cancelled);
}

TEST_CASE("a NaN, Inf or huge weight is an error from the quantization map, not an abort", "[storage]") {
    // Many rows, so that parallel_for runs several threads: an exception leaving one called std::terminate.
    for (float bad : {NAN, INFINITY, 1e30f}) {
        std::vector<float> v = randn(64 * 256, 9);
        v[40 * 256 + 17] = bad;
        const Owned w = f32_weight(v, 64, 256);
        CHECK_THROWS_AS(quantization_error(w.view, nullptr, DType::Q4_K, 64, 64), InputError);
        CHECK_THROWS_AS(quantization_error(w.view, nullptr, DType::Q8_0, 64, 64), InputError);
    }
}

TEST_CASE("the storage view shows a weight's type and its quantization error, on the fly and against an original",
          "[storage][widgets]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);
    MainWindow w;
    QSignalSpy loaded{&w, &MainWindow::modelReady};
    w.resize(1600, 1000);
    w.show();
    const QString demo = QString::fromStdString(test::demo_model().string());
    w.openPath(demo);
    REQUIRE(wait_until([&] { return loaded.count() >= 1; }));

    StorageView view(w.state(), w.client());
    view.resize(1100, 700);
    view.show();
    QSignalSpy ready{&view, &StorageView::resultReady};
    w.selectPart(QStringLiteral("block/attention/wq"), 1);
    view.setCompareType(DType::Q4_0);
    REQUIRE(wait_until([&] { return view.result() && view.weightName() == "layers.1.attention.wq"; }));
    CHECK(view.storageText().contains("BF16"));
    CHECK(view.storageText().contains("16"));  // bits per weight
    CHECK(view.result()->approx_type == DType::Q4_0);
    CHECK(view.result()->rel_l2 > 0.0);
    CHECK(view.result()->rel_l2 < 0.2);
    CHECK(view.status().contains("Q4_0"));
    CHECK(view.storageText().contains("relative L2 error"));
    CHECK(view.storageText().contains("largest |error|"));
    CHECK(view.hasContent());
    CHECK(view.heatmap()->rows() > 0);
    CHECK(test::distinct_colours(view.heatmap()->grab().toImage()) > 20);
    QTest::qWait(100);  // the layout settles around the taller header
    if (const char* dir = std::getenv("STRATA_SCREENSHOT_DIR")) view.grab().save(QString::fromUtf8(dir) + "/storage-01-on-the-fly.png");

    // The final norm's gain: a vector, one row of dim weights.
    w.selectPart(QStringLiteral("norm"), 0);
    REQUIRE(wait_until([&] { return view.weightName() == "norm" && view.result(); }));
    CHECK(view.storageText().contains("256 weights"));
    CHECK(view.result()->rows == 1);

    // A Q8_0 copy of the demonstration model, opened, compared with the original.
    const auto model = load_model(test::demo_model());
    const std::filesystem::path q8 = test::temp_dir("storage-q8") / "demo-q8_0.gguf";
    const QuantScheme scheme = quant_scheme("Q8_0");
    write_quantized_gguf(*model, q8, scheme, quant_plan(*model, scheme));
    w.openPath(QString::fromStdString(q8.string()));
    REQUIRE(wait_until([&] { return loaded.count() >= 2; }));
    w.selectPart(QStringLiteral("block/feed_forward/w2"), 0);
    REQUIRE(wait_until([&] { return view.weightName() == "layers.0.feed_forward.w2" && view.storageText().contains("Q8_0"); }));
    CHECK(view.storageText().contains("8.5"));
    CHECK(view.storageText().contains("32 weights in 34 bytes"));
    CHECK(!view.result());
    CHECK(view.status().contains("Original"));
    view.setOriginalPath(demo);
    REQUIRE(wait_until([&] { return view.result() != nullptr; }));
    CHECK(view.result()->approx_type == DType::Q8_0);
    CHECK(view.result()->original_type == DType::BF16);
    CHECK(view.result()->rel_l2 < 0.02);
    QTest::qWait(100);  // the layout settles around the taller header
    if (const char* dir = std::getenv("STRATA_SCREENSHOT_DIR")) view.grab().save(QString::fromUtf8(dir) + "/storage-02-against-original.png");

    // An original that is not a checkpoint: a clear message, nothing shown.
    view.setOriginalPath(QString::fromStdString(test::temp_dir("storage-empty").string()));
    REQUIRE(wait_until([&] { return view.status().startsWith("Cannot compare"); }));
    CHECK(!view.hasContent());
}
