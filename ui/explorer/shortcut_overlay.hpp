#pragma once
// The keyboard shortcuts over the window: a translucent sheet (F1 or ?) listing every menu action that has a
// shortcut, grouped by menu, read from the menu bar itself so the list cannot drift from what the keys do.
// Esc, F1, ? or a click hide it. A menu with the property "shortcutRange" (a label) is one line, its first and last
// keys (the numbered recent models).
#include <QList>
#include <QString>
#include <QWidget>

class QMenuBar;

namespace strata::ui {

class ShortcutOverlay : public QWidget {
    Q_OBJECT
public:
    struct Entry {
        QString menu;      // "Navigate"
        QString action;    // "Next Layer"
        QString keys;      // "], PgDown" in the platform's notation
    };

    // Covers `window` (and follows its size); hidden until shown.
    explicit ShortcutOverlay(QWidget* window, QMenuBar* menus);

    // Every action with a shortcut in `menus`, its submenus included, in menu order.
    static QList<Entry> collect(QMenuBar* menus);
    const QList<Entry>& entries() const { return entries_; }

public slots:
    void showOverlay();
    void toggle();

protected:
    bool event(QEvent* e) override;
    bool eventFilter(QObject* watched, QEvent* e) override;
    void paintEvent(QPaintEvent* e) override;
    void keyPressEvent(QKeyEvent* e) override;
    void mousePressEvent(QMouseEvent* e) override;

private:
    QMenuBar* menus_;
    QList<Entry> entries_;
};

}  // namespace strata::ui
