#pragma once
// Colour maps for the views, made by glm::mix between control points.
//   diverging  - for signed activations and weights: blue (negative), near-white (0), red (positive)
//   sequential - for magnitudes and probabilities: viridis-like, dark (low) to yellow (high)
#include <QColor>
#include <QImage>

namespace strata::ui {

// t in [-1, 1]; values outside are clamped; NaN is grey.
QRgb divergingColor(float t);
// t in [0, 1]; values outside are clamped; NaN is grey.
QRgb sequentialColor(float t);

// A value range and a map.
struct ColorScale {
    enum class Kind { Diverging, Sequential };
    Kind kind = Kind::Diverging;
    float lo = -1.0f, hi = 1.0f;  // diverging: symmetric (lo = -hi)
    QRgb map(float v) const;
    // A horizontal or vertical gradient image of the map (for legends), high values at the top / right.
    QImage legend(int width, int height, bool vertical) const;
};

}  // namespace strata::ui
