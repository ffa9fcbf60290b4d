#pragma once
// Helpers for the UI tests: the QApplication (Catch2WithMain owns main()), waiting on the event loop, the
// demonstration model written once per process, and a measure of how non-uniform a rendered image is.
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <set>

#include <QApplication>
#include <QDeadlineTimer>
#include <QImage>
#include <QTest>

#include "strata/demo.hpp"
#include "support.hpp"

namespace strata::test {

inline QApplication& ui_app() {
    // Offscreen unless the caller chose a platform (ctest sets QT_QPA_PLATFORM=offscreen).
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    // A UI test that opens a Vulkan device opens it with the validation layer, as the Vulkan tests do (ctest can
    // give each executable only one variable, QT_QPA_PLATFORM above); STRATA_VK_VALIDATION=0 turns it off.
    if (qEnvironmentVariableIsEmpty("STRATA_VK_VALIDATION")) qputenv("STRATA_VK_VALIDATION", "1");
    static int argc = 1;
    static char name[] = "strata_ui_tests";
    static char* argv[] = {name, nullptr};
    // Never destroyed: Qt does not support tearing the application down from static destructors after main()
    // (QTest's input devices are destroyed after it and crash); the process exit reclaims it.
    static QApplication* app = new QApplication(argc, argv);
    return *app;
}

// Processes events until pred() holds or the time is up; returns pred().
inline bool wait_until(const std::function<bool()>& pred, int ms = 60000) {
    return QTest::qWaitFor([&] { return pred(); }, ms);
}

// The demonstration model (the trained one, real tokenizer) under the test build's tmp/.
inline std::filesystem::path demo_model() {
    static std::filesystem::path dir = [] {
        std::filesystem::path d = temp_dir("ui-demo");
        strata::make_demo_model(d, tokenizer_json());
        return d;
    }();
    return dir;
}

inline int distinct_colours(const QImage& img) {
    std::set<QRgb> seen;
    const QImage rgb = img.convertToFormat(QImage::Format_RGB32);
    for (int y = 0; y < rgb.height(); ++y) {
        const QRgb* line = reinterpret_cast<const QRgb*>(rgb.constScanLine(y));
        for (int x = 0; x < rgb.width(); ++x) seen.insert(line[x]);
    }
    return int(seen.size());
}

}  // namespace strata::test
