#include "views/plot_util.hpp"

#include <QPalette>

#include <cmath>

namespace strata::ui {

std::vector<double> niceTicks(double lo, double hi, int count) {
    std::vector<double> ticks;
    if (!(hi > lo) || count < 1) {
        ticks.push_back(lo);
        return ticks;
    }
    const double raw = (hi - lo) / count;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
        step = m * mag;
        if (step >= raw) break;
    }
    for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
    return ticks;
}

QString formatValue(double v) {
    if (std::isnan(v)) return QStringLiteral("NaN");
    if (std::isinf(v)) return v > 0 ? QStringLiteral("+inf") : QStringLiteral("-inf");
    const double a = std::fabs(v);
    if (a != 0 && (a >= 1e5 || a < 1e-3)) return QString::number(v, 'e', 2);
    return QString::number(v, 'g', 3);
}

QString groupDigits(unsigned long long v) {
    QString s = QString::number(v);
    for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(i, QLatin1Char(','));
    return s;
}

QString formatBytes(unsigned long long bytes) {
    const char* units[] = {"B", "KB", "MB", "GB", "TB"};
    double v = double(bytes);
    int u = 0;
    while (v >= 1000.0 && u < 4) {
        v /= 1000.0;
        ++u;
    }
    return u == 0 ? QStringLiteral("%1 B").arg(bytes) : QStringLiteral("%1 %2").arg(v, 0, 'f', 1).arg(units[u]);
}

QColor faintText(const QPalette& palette, int alpha) {
    QColor c = palette.color(QPalette::Text);
    c.setAlpha(alpha);
    return c;
}

}  // namespace strata::ui
