// Living with the app: settings survive a restart (recent models, backend and device, chat sampling, window
// geometry and splitter), the keyboard shortcuts exist, are shown in the menus and act (layers, play, find,
// run), the shortcuts overlay shows, and views render at the screen's device pixel ratio ([.hidpi], run by
// ctest a second time with QT_SCALE_FACTOR=2). Settings go to a temporary folder, never the user's.
#include <cmath>
#include <random>

#include <QAction>
#include <QCoreApplication>
#include <QLineEdit>
#include <QMenu>
#include <QSettings>
#include <QSignalSpy>
#include <QSplitter>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTreeView>

#include "catch.hpp"
#include "chat/chat_settings.hpp"
#include "explorer/layer_stepper.hpp"
#include "explorer/main_window.hpp"
#include "explorer/shortcut_overlay.hpp"
#include "explorer/window_settings.hpp"
#include "ui_support.hpp"
#include "views/heatmap_widget.hpp"
#include "views/norms_view.hpp"
#include "worker/engine_worker.hpp"

using namespace strata;
using namespace strata::ui;
using strata::test::wait_until;

namespace {

// Every QSettings of this process reads and writes under a fresh temporary folder.
struct PrivateSettings {
    QTemporaryDir dir;
    PrivateSettings() {
        test::ui_app();
        REQUIRE(dir.isValid());
        QCoreApplication::setOrganizationName(QStringLiteral("strata-test"));
        QCoreApplication::setApplicationName(QStringLiteral("strata-test"));
        QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, dir.path());
        QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, dir.path());
        QSettings().clear();
    }
    QString file() const { return QSettings().fileName(); }
};

QAction* action(MainWindow& w, const char* name) { return w.findChild<QAction*>(QString::fromLatin1(name)); }

bool activate(QWidget& w) {
    w.show();
    w.activateWindow();
    return QTest::qWaitForWindowActive(&w);
}

}  // namespace

TEST_CASE("settings survive a restart: recent models, backend, device, sampling, window layout", "[ui][settings]") {
    PrivateSettings settings;
    CHECK(settings.file().startsWith(settings.dir.path()));
    QTemporaryDir models;
    const QString a = models.filePath(QStringLiteral("Meta-Llama-3-8B")), b = models.filePath(QStringLiteral("llama-3.2-1b.gguf"));
    QDir().mkpath(a);
    QFile(b).open(QIODevice::WriteOnly);

    QList<int> panes;  // the splitter as it was left
    {
        MainWindow w;
        CHECK(w.backend() == "cpu");  // nothing chosen yet
        CHECK(w.device() == -1);
        w.setBackend(QStringLiteral("vulkan"));
        w.setDevice(1);
        addRecentModel(a);
        addRecentModel(b);
        addRecentModel(a);  // once, first
        w.resize(1100, 720);
        w.show();
        REQUIRE(QTest::qWaitForWindowExposed(&w));
        w.splitter()->setSizes({200, 600, 300});
        panes = w.splitter()->sizes();
        CHECK(panes[0] < panes[1]);
        ChatSettings chat;
        chat.sampler.temperature = 0.7f;
        chat.sampler.top_k = 40;
        chat.sampler.top_p = 0.9f;
        chat.sampler.seed = 1234;
        chat.maxTokens = 99;
        saveChatSettings(chat);
        saveSystemPrompt(QStringLiteral("Answer in French."));
        w.close();  // saves the layout
    }
    MainWindow w;
    CHECK(w.backend() == "vulkan");
    CHECK(w.device() == 1);
    CHECK(w.size() == QSize(1100, 720));
    w.show();
    REQUIRE(QTest::qWaitForWindowExposed(&w));
    CHECK(w.splitter()->sizes() == panes);
    CHECK(loadRecentModels() == QStringList{a, b});
    // File > Open Recent lists them, newest first, with numbered accelerators and the full path as data.
    QMenu* recent = w.recentMenu();
    REQUIRE(recent);
    CHECK(recent->title().remove('&') == "Open Recent");
    CHECK(recent->isEnabled());
    QStringList paths;
    for (QAction* act : recent->actions())
        if (!act->data().toString().isEmpty()) paths << act->data().toString();
    CHECK(paths == QStringList{a, b});
    CHECK(recent->actions().first()->text().contains("Meta-Llama-3-8B"));
    const ChatSettings chat = loadChatSettings();
    CHECK(chat.sampler.temperature == Approx(0.7f));
    CHECK(chat.sampler.top_k == 40);
    CHECK(chat.sampler.top_p == Approx(0.9f));
    CHECK(chat.sampler.seed == 1234u);
    CHECK(chat.maxTokens == 99);
    CHECK(loadSystemPrompt() == "Answer in French.");

    // Clearing the list empties the menu.
    clearRecentModels();
    CHECK(loadRecentModels().isEmpty());
    // A missing model stays listed but disabled.
    addRecentModel(models.filePath(QStringLiteral("gone")));
    MainWindow again;
    REQUIRE(!again.recentMenu()->actions().isEmpty());
    CHECK(!again.recentMenu()->actions().first()->isEnabled());
    CHECK(again.recentMenu()->actions().first()->text().contains("missing"));
}

TEST_CASE("the demonstration model is written into the user's data folder, the tokenizer looked for where the package puts it", "[ui][settings]") {
    PrivateSettings settings;
    const QByteArray cache = qgetenv("STRATA_CACHE_DIR");
    qunsetenv("STRATA_CACHE_DIR");
    const QString data = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    CHECK(EngineWorker::demoDir() == data + "/demo");
    const QStringList where = EngineWorker::tokenizerCandidates();
    CHECK(where.contains(QDir::homePath() + "/.cache/strata/tokenizer/tokenizer.json"));
    CHECK(where.contains(QDir::cleanPath(QCoreApplication::applicationDirPath() + "/../share/strata/tokenizer.json")));
    CHECK(where.contains("/usr/share/strata/tokenizer.json"));
    if (!cache.isEmpty()) {
        qputenv("STRATA_CACHE_DIR", cache);  // a source checkout's cache comes first
        CHECK(EngineWorker::demoDir() == QString::fromLocal8Bit(cache) + "/demo");
        CHECK(EngineWorker::tokenizerCandidates().first() == QDir::cleanPath(QString::fromLocal8Bit(cache) + "/tokenizer/tokenizer.json"));
    }
}

TEST_CASE("shortcuts exist, show in the menus and act, and F1 shows the overlay", "[ui][shortcuts]") {
    PrivateSettings settings;
    MainWindow w;
    QSignalSpy runs(&w, &MainWindow::runReady);
    w.resize(1400, 900);
    REQUIRE(activate(w));
    w.openPath(QString::fromStdString(test::demo_model().string()));
    REQUIRE(wait_until([&] { return runs.count() >= 1; }));

    const std::vector<std::pair<const char*, QKeySequence>> expected{
        {"actionOpen", QKeySequence::Open},
        {"actionRun", QKeySequence(QStringLiteral("Ctrl+R"))},
        {"actionNextLayer", QKeySequence(Qt::Key_BracketRight)},
        {"actionPreviousLayer", QKeySequence(Qt::Key_BracketLeft)},
        {"actionPlay", QKeySequence(Qt::Key_P)},
        {"actionFindToken", QKeySequence::Find},
        {"actionShortcuts", QKeySequence(Qt::Key_F1)},
    };
    for (const auto& [name, keys] : expected) {
        INFO(name);
        QAction* a = action(w, name);
        REQUIRE(a);
        CHECK(a->shortcuts().contains(keys));
        CHECK(!a->associatedObjects().isEmpty());  // in a menu, so the menu shows the shortcut
    }

    // Keys go to a widget that does not take text (the atlas), as when a person browses the model.
    QWidget* focus = w.atlasView();
    focus->setFocus();
    REQUIRE(wait_until([&] { return focus->hasFocus(); }, 2000));
    const int layer = w.state()->layer();
    QTest::keyClick(focus, Qt::Key_BracketRight);
    CHECK(w.state()->layer() == layer + 1);
    QTest::keyClick(focus, Qt::Key_BracketLeft);
    CHECK(w.state()->layer() == layer);
    QTest::keyClick(focus, Qt::Key_P);
    CHECK(w.stepper()->playing());
    QTest::keyClick(focus, Qt::Key_P);
    CHECK(!w.stepper()->playing());

    // Ctrl+R runs the prompt again.
    const int before = runs.count();
    QTest::keyClick(focus, Qt::Key_R, Qt::ControlModifier);
    CHECK(wait_until([&] { return runs.count() > before; }));

    // Ctrl+F opens the find field; typing selects the first token that contains the text; Esc closes it.
    QTest::keyClick(focus, Qt::Key_F, Qt::ControlModifier);
    QLineEdit* find = w.findField();
    REQUIRE(find->isVisible());
    CHECK(wait_until([&] { return find->hasFocus(); }, 2000));
    QTest::keyClicks(find, QStringLiteral("wind"));
    const RunResultPtr& run = w.state()->run();
    REQUIRE(run);
    const int pos = w.state()->position();
    REQUIRE(pos >= 0);
    CHECK(run->tokenTexts[pos].contains("wind", Qt::CaseInsensitive));
    CHECK(w.findToken(QStringLiteral("no such token here"), true) == -1);
    QTest::keyClick(find, Qt::Key_Escape);
    CHECK(!find->isVisible());

    // F1: the overlay lists the shortcuts from the menus, drawn over the window; Esc hides it.
    focus->setFocus();
    ShortcutOverlay* overlay = w.shortcutOverlay();
    REQUIRE(overlay);
    CHECK(!overlay->isVisible());
    const QImage plain = w.grab().toImage();
    QTest::keyClick(focus, Qt::Key_F1);
    REQUIRE(overlay->isVisible());
    CHECK(overlay->geometry() == w.rect());
    bool listsNext = false, listsFind = false;
    for (const ShortcutOverlay::Entry& e : overlay->entries()) {
        listsNext = listsNext || (e.action == "Next Layer" && e.keys.contains("]"));
        listsFind = listsFind || e.action.startsWith("Find Token");
    }
    CHECK(listsNext);
    CHECK(listsFind);
    CHECK(overlay->entries().size() >= 15);
    const QImage shown = w.grab().toImage();
    CHECK(shown != plain);
    QTest::keyClick(overlay, Qt::Key_Escape);
    CHECK(!overlay->isVisible());
}

TEST_CASE("a view renders at the screen's device pixel ratio", "[ui][.hidpi]") {
    test::ui_app();
    const qreal dpr = qApp->devicePixelRatio();
    const bool scaled = qEnvironmentVariable("QT_SCALE_FACTOR") == QLatin1String("2");
    if (scaled) REQUIRE(dpr == Approx(2.0));
    // Many more features than pixels, random values: a map drawn at device resolution differs between
    // neighbouring device pixels; one drawn at logical resolution and scaled up repeats each in pairs.
    const int rows = 6, cols = 4096;
    std::vector<float> x(size_t(rows * cols));
    std::mt19937 rng(7);
    std::normal_distribution<float> n;
    for (float& v : x) v = n(rng);
    HeatmapWidget w;
    w.resize(500, 240);
    w.setMatrix(x, rows, cols);
    w.show();
    const QPixmap pm = w.grab();
    CHECK(pm.devicePixelRatio() == Approx(dpr));
    CHECK(pm.width() == int(std::lround(w.width() * dpr)));
    CHECK(pm.height() == int(std::lround(w.height() * dpr)));
    const QImage img = pm.toImage().convertToFormat(QImage::Format_RGB32);
    const QRect plot = w.plotRect();
    const int y = int((plot.top() + plot.height() / 2) * dpr);
    int pairs = 0, differing = 0;
    for (int x0 = int((plot.left() + 2) * dpr); x0 + 1 < int((plot.right() - 2) * dpr); x0 += 2) {
        ++pairs;
        if (img.pixel(x0, y) != img.pixel(x0 + 1, y)) ++differing;
    }
    REQUIRE(pairs > 100);
    CHECK(differing > pairs / 2);  // at 2x: sharp, each device pixel its own bucket (at 1x trivially so)
}

TEST_CASE("without any Vulkan driver the window says so and runs on the CPU", "[ui][novulkan]") {
    PrivateSettings settings;
    // Before this process's first Vulkan call: the loader finds no driver at all.
    const QByteArray oldIcd = qgetenv("VK_ICD_FILENAMES"), oldDrivers = qgetenv("VK_DRIVER_FILES");
    qputenv("VK_ICD_FILENAMES", "/nonexistent/icd.json");
    qputenv("VK_DRIVER_FILES", "/nonexistent/icd.json");
    {
        MainWindow w;
        QSignalSpy listed(&w, &MainWindow::devicesListed);
        QSignalSpy loaded(&w, &MainWindow::modelReady);
        w.show();
        REQUIRE(wait_until([&] { return listed.count() >= 1; }, 20000));
        CHECK(w.vulkanDevices().isEmpty());
        CHECK(!w.vulkanProblem().isEmpty());
        // Model > Vulkan Device says it, disabled.
        QMenu* devices = w.findChild<QMenu*>(QStringLiteral("deviceMenu"));
        REQUIRE(devices);
        bool says = false;
        for (QAction* a : devices->actions()) says = says || (!a->isEnabled() && a->text().contains("CPU backend"));
        CHECK(says);

        // Asked for Vulkan anyway (a remembered choice, or --backend vulkan): the CPU runs it, and the window says why.
        w.setBackend(QStringLiteral("vulkan"), false);
        w.openPath(QString::fromStdString(test::demo_model().string()));
        REQUIRE(wait_until([&] { return loaded.count() >= 1; }));
        REQUIRE(w.state()->model());
        CHECK(w.state()->model()->backend == "cpu");
        CHECK(w.lastError().contains("CPU backend instead"));
    }
    qputenv("VK_ICD_FILENAMES", oldIcd);
    qputenv("VK_DRIVER_FILES", oldDrivers);
    if (oldIcd.isEmpty()) qunsetenv("VK_ICD_FILENAMES");
    if (oldDrivers.isEmpty()) qunsetenv("VK_DRIVER_FILES");
}

TEST_CASE("a dark system palette gives dark views with readable text and guides", "[ui][palette]") {
    PrivateSettings settings;
    const QPalette light = QApplication::palette();
    // What a dark desktop theme hands Qt 6.4 (which has no colour-scheme API): a dark palette.
    QPalette dark;
    dark.setColor(QPalette::Window, QColor(0x2b, 0x2b, 0x2b));
    dark.setColor(QPalette::WindowText, QColor(0xe6, 0xe6, 0xe6));
    dark.setColor(QPalette::Base, QColor(0x1e, 0x1e, 0x1e));
    dark.setColor(QPalette::AlternateBase, QColor(0x26, 0x26, 0x26));
    dark.setColor(QPalette::Text, QColor(0xe6, 0xe6, 0xe6));
    dark.setColor(QPalette::Button, QColor(0x33, 0x33, 0x33));
    dark.setColor(QPalette::ButtonText, QColor(0xe6, 0xe6, 0xe6));
    dark.setColor(QPalette::Highlight, QColor(0x3d, 0x7a, 0xd6));
    dark.setColor(QPalette::HighlightedText, Qt::white);
    dark.setColor(QPalette::Link, QColor(0x6c, 0xb0, 0xff));
    dark.setColor(QPalette::Mid, QColor(0x55, 0x55, 0x55));
    QApplication::setPalette(dark);
    {
        MainWindow w;
        QSignalSpy runs(&w, &MainWindow::runReady);
        w.resize(1600, 1000);
        w.show();
        w.openPath(QString::fromStdString(test::demo_model().string()));
        REQUIRE(wait_until([&] { return runs.count() >= 1; }));
        w.showView(w.normsView());
        QTest::qWait(50);
        const QImage img = w.grab().toImage();
        const QString shots = qEnvironmentVariable("STRATA_UI_SHOTS");  // set it to look at the pictures
        if (!shots.isEmpty()) img.save(shots + "/dark-norms.png");
        // The window is dark, and there is light text on it.
        const QImage norms = w.normsView()->grab().toImage();
        int darkPixels = 0, lightPixels = 0;
        for (int y = 0; y < norms.height(); y += 3)
            for (int x = 0; x < norms.width(); x += 3) {
                const int l = QColor(norms.pixel(x, y)).lightness();
                darkPixels += l < 80;
                lightPixels += l > 180;
            }
        CHECK(darkPixels > (norms.width() / 3) * (norms.height() / 3) / 2);
        CHECK(lightPixels > 50);

        // The shortcuts overlay's panel is dark too.
        w.shortcutOverlay()->showOverlay();
        const QImage overlay = w.grab().toImage();
        if (!shots.isEmpty()) overlay.save(shots + "/dark-overlay.png");
        int darkRow = 0;
        for (int x = w.width() / 2 - 20; x < w.width() / 2 + 20; ++x)
            darkRow += QColor(overlay.pixel(x, w.height() / 2)).lightness() < 90;
        CHECK(darkRow > 25);
    }
    QApplication::setPalette(light);
}
