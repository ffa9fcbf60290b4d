#pragma once
// Small helpers shared by the painted views: axis ticks and number formatting.
#include <vector>

#include <QColor>
#include <QString>

class QPalette;

namespace strata::ui {

// About `count` round tick values covering [lo, hi] (1, 2, 5 x 10^k steps).
std::vector<double> niceTicks(double lo, double hi, int count);
// A compact number: 3 significant digits, exponent form for very large or small magnitudes.
QString formatValue(double v);
// 1234567 -> "1,234,567"
QString groupDigits(unsigned long long v);
// Bytes as "1.5 GB", "33.4 MB".
QString formatBytes(unsigned long long bytes);
// The palette's text colour at `alpha` (0..255): grid lines and guides that stay faint on light and dark themes.
QColor faintText(const QPalette& palette, int alpha);

}  // namespace strata::ui
