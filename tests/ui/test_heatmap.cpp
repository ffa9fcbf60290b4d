// The heatmap widget and colour maps: extremes survive the reduction of 4096 features to a few hundred pixels,
// the read-out names the element under the mouse, zoom narrows the visible features.
#include <cmath>

#include "catch.hpp"
#include "ui_support.hpp"
#include "views/colormap.hpp"
#include "views/heatmap_widget.hpp"
#include "views/vector_plot.hpp"

using namespace strata::ui;

TEST_CASE("the diverging map is white at zero, blue below, red above, and symmetric in darkness", "[ui][heatmap]") {
    const QColor zero = QColor::fromRgb(divergingColor(0.0f));
    CHECK(zero.red() > 240);
    CHECK(zero.green() > 240);
    const QColor neg = QColor::fromRgb(divergingColor(-1.0f));
    const QColor pos = QColor::fromRgb(divergingColor(1.0f));
    CHECK(neg.blue() > neg.red());
    CHECK(pos.red() > pos.blue());
    CHECK(std::abs(neg.lightness() - pos.lightness()) < 40);
    CHECK(divergingColor(5.0f) == divergingColor(1.0f));  // clamped
    // Sequential: lightness rises with the value.
    CHECK(QColor::fromRgb(sequentialColor(0.0f)).lightness() < QColor::fromRgb(sequentialColor(1.0f)).lightness());
}

TEST_CASE("one outlier among 4096 features stays visible and is reported under the mouse", "[ui][heatmap]") {
    strata::test::ui_app();
    const int rows = 8, cols = 4096;
    std::vector<float> x(size_t(rows * cols));
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * std::sin(float(i) * 0.37f);
    x[size_t(5 * cols + 1234)] = 40.0f;  // far outside the robust range
    HeatmapWidget w;
    w.resize(600, 300);
    w.setMatrix(x, rows, cols);
    // The robust range ignores the single outlier.
    CHECK(w.scale().hi < 1.0f);
    CHECK(w.scale().lo == -w.scale().hi);

    const QImage img = w.grab().toImage();
    CHECK(strata::test::distinct_colours(img) > 50);
    const QRect p = w.plotRect();
    const int px = p.left() + int((1234.5 / cols) * p.width());
    const int py = p.top() + int((5.5 / rows) * p.height());
    const QRgb maxRed = divergingColor(1.0f);
    bool found = false;
    for (int dx = -2; dx <= 2; ++dx) found = found || img.pixel(px + dx, py) == maxRed;
    CHECK(found);

    // The probe under that pixel reports the outlier itself, not a neighbour of its bucket.
    HeatmapWidget::Probe pr;
    for (int dx = -2; dx <= 2 && !(pr.valid && pr.col == 1234); ++dx) pr = w.probe(QPoint(px + dx, py));
    REQUIRE(pr.valid);
    CHECK(pr.row == 5);
    CHECK(pr.col == 1234);
    CHECK(pr.value == 40.0f);
    CHECK(pr.colLast > pr.colFirst);  // a reduced pixel
    CHECK(w.describe(pr).contains("feature 1234"));

    // Zoom: fewer features visible; the outlier still under its own pixel when it is in view.
    w.zoomColumns(8.0, 1234.0);
    CHECK(w.visibleColumns() == Approx(cols / 8.0));
    w.resetZoom();
    CHECK(w.visibleColumns() == Approx(double(cols)));
}

TEST_CASE("an empty heatmap says why instead of drawing", "[ui][heatmap]") {
    strata::test::ui_app();
    HeatmapWidget w;
    w.resize(300, 200);
    w.clear("nothing here");
    CHECK(w.rows() == 0);
    CHECK_FALSE(w.probe(QPoint(150, 100)).valid);
    CHECK(strata::test::distinct_colours(w.grab().toImage()) > 1);  // the message text
}

TEST_CASE("the vector plot draws every extreme feature", "[ui][heatmap]") {
    strata::test::ui_app();
    VectorPlot v;
    v.resize(500, 200);
    std::vector<float> g(4096, 1.0f);
    g[4000] = 9.0f;
    v.setReferenceLine(1.0f);
    v.setVector(g, "feature", "gain");
    v.setMarked({4000});
    const QImage img = v.grab().toImage();
    CHECK(strata::test::distinct_colours(img) > 5);
}
