#include "views/colormap.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <glm/glm.hpp>

namespace strata::ui {

namespace {

struct Stop {
    float t;
    glm::vec3 rgb;
};

// Blue - white - red, darker at the ends so that large values stand out from moderate ones.
constexpr std::array<Stop, 7> kDiverging{{
    {-1.00f, {0.020f, 0.188f, 0.380f}},
    {-0.66f, {0.129f, 0.400f, 0.675f}},
    {-0.33f, {0.573f, 0.773f, 0.871f}},
    {0.00f, {0.969f, 0.969f, 0.969f}},
    {0.33f, {0.957f, 0.647f, 0.510f}},
    {0.66f, {0.839f, 0.376f, 0.302f}},
    {1.00f, {0.404f, 0.000f, 0.122f}},
}};

// Close to viridis: perceptually ordered, readable in greyscale.
constexpr std::array<Stop, 6> kSequential{{
    {0.0f, {0.267f, 0.005f, 0.329f}},
    {0.2f, {0.254f, 0.265f, 0.530f}},
    {0.4f, {0.164f, 0.471f, 0.558f}},
    {0.6f, {0.134f, 0.659f, 0.518f}},
    {0.8f, {0.478f, 0.821f, 0.318f}},
    {1.0f, {0.993f, 0.906f, 0.144f}},
}};

template <size_t N>
QRgb lookup(const std::array<Stop, N>& stops, float t) {
    if (std::isnan(t)) return qRgb(128, 128, 128);
    t = std::clamp(t, stops.front().t, stops.back().t);
    size_t i = 1;
    while (i + 1 < N && t > stops[i].t) ++i;
    const Stop& a = stops[i - 1];
    const Stop& b = stops[i];
    const glm::vec3 c = glm::mix(a.rgb, b.rgb, (t - a.t) / (b.t - a.t));
    return qRgb(int(c.r * 255.0f + 0.5f), int(c.g * 255.0f + 0.5f), int(c.b * 255.0f + 0.5f));
}

}  // namespace

QRgb divergingColor(float t) { return lookup(kDiverging, t); }
QRgb sequentialColor(float t) { return lookup(kSequential, t); }

QRgb ColorScale::map(float v) const {
    if (kind == Kind::Diverging) {
        const float r = std::max(std::fabs(lo), std::fabs(hi));
        return divergingColor(r > 0 ? v / r : 0.0f);
    }
    const float span = hi - lo;
    return sequentialColor(span > 0 ? (v - lo) / span : 0.0f);
}

QImage ColorScale::legend(int width, int height, bool vertical) const {
    QImage img(std::max(1, width), std::max(1, height), QImage::Format_RGB32);
    const int n = vertical ? img.height() : img.width();
    for (int i = 0; i < n; ++i) {
        const float f = n > 1 ? float(i) / float(n - 1) : 0.0f;
        const float v = vertical ? hi - f * (hi - lo) : lo + f * (hi - lo);
        const QRgb c = map(v);
        if (vertical)
            for (int x = 0; x < img.width(); ++x) img.setPixel(x, i, c);
        else
            for (int y = 0; y < img.height(); ++y) img.setPixel(i, y, c);
    }
    return img;
}

}  // namespace strata::ui
