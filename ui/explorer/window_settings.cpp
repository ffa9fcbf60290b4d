#include "explorer/window_settings.hpp"

#include <QSettings>

namespace strata::ui {

namespace {
const char* kRecent = "recentModels";  // the key the first explorer used: existing lists carry over
const char* kBackend = "engine/backend";
const char* kDevice = "engine/device";
const char* kGeometry = "window/geometry";
const char* kState = "window/state";
const char* kSplitter = "window/splitter";
}  // namespace

QStringList loadRecentModels() { return QSettings().value(kRecent).toStringList(); }

QStringList addRecentModel(const QString& path) {
    QSettings settings;
    QStringList recent = settings.value(kRecent).toStringList();
    recent.removeAll(path);
    recent.prepend(path);
    while (recent.size() > kMaxRecentModels) recent.removeLast();
    settings.setValue(kRecent, recent);
    return recent;
}

void clearRecentModels() { QSettings().remove(kRecent); }

QString loadBackend() {
    const QString b = QSettings().value(kBackend).toString();
    return b == QLatin1String("vulkan") ? b : QStringLiteral("cpu");
}

void saveBackend(const QString& name) { QSettings().setValue(kBackend, name); }

int loadDevice() {
    bool ok = false;
    const int d = QSettings().value(kDevice, -1).toInt(&ok);
    return ok && d >= 0 ? d : -1;
}

void saveDevice(int index) { QSettings().setValue(kDevice, index); }

WindowLayout loadWindowLayout() {
    const QSettings s;
    return {s.value(kGeometry).toByteArray(), s.value(kState).toByteArray(), s.value(kSplitter).toByteArray()};
}

void saveWindowLayout(const WindowLayout& layout) {
    QSettings s;
    s.setValue(kGeometry, layout.geometry);
    s.setValue(kState, layout.state);
    s.setValue(kSplitter, layout.splitter);
}

}  // namespace strata::ui
