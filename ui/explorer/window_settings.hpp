#pragma once
// What the explorer window remembers between runs (QSettings, group "window" and the top-level keys below):
// recent models, the backend and Vulkan device, the window's geometry and state, and the splitter between the
// atlas, the views and the cards. The chat's sampling settings live in chat/chat_settings.hpp.
#include <QByteArray>
#include <QString>
#include <QStringList>

namespace strata::ui {

inline constexpr int kMaxRecentModels = 8;

QStringList loadRecentModels();
// Puts `path` first (once), keeping at most kMaxRecentModels; returns the new list.
QStringList addRecentModel(const QString& path);
void clearRecentModels();

// "cpu" (also when nothing was chosen yet) or "vulkan".
QString loadBackend();
void saveBackend(const QString& name);
// The Vulkan device index, -1 for the best one.
int loadDevice();
void saveDevice(int index);

struct WindowLayout {
    QByteArray geometry;  // QWidget::saveGeometry
    QByteArray state;     // QMainWindow::saveState (toolbars and docks)
    QByteArray splitter;  // QSplitter::saveState of atlas | views | card
};
WindowLayout loadWindowLayout();
void saveWindowLayout(const WindowLayout& layout);

}  // namespace strata::ui
