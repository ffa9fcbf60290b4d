#include "explorer/shortcut_overlay.hpp"

#include <algorithm>

#include <QAction>
#include <QKeyEvent>
#include <QMenu>
#include <QMenuBar>
#include <QPainter>
#include <QPainterPath>
#include <QRegularExpression>

namespace strata::ui {

namespace {
QString plain(QString text) {
    text.remove(QRegularExpression(QStringLiteral("&(?!&)")));
    text.replace(QStringLiteral("&&"), QStringLiteral("&"));
    text.remove(QChar(0x2026));  // "Open…" reads as "Open" in a list
    return text;
}

void collectMenu(QMenu* menu, const QString& title, QList<ShortcutOverlay::Entry>& out) {
    // Numbered lists (recent models: Ctrl+Alt+1, +2, ...) are one line: the first and the last key.
    if (menu->property("shortcutRange").isValid()) {
        QList<QKeySequence> keys;
        for (QAction* a : menu->actions())
            if (!a->shortcut().isEmpty()) keys << a->shortcut();
        if (!keys.isEmpty())
            out.push_back({title, menu->property("shortcutRange").toString(),
                           keys.size() == 1 ? keys.first().toString(QKeySequence::NativeText)
                                            : QStringLiteral("%1 \u2026 %2").arg(keys.first().toString(QKeySequence::NativeText),
                                                                            keys.last().toString(QKeySequence::NativeText))});
        return;
    }
    for (QAction* a : menu->actions()) {
        if (a->isSeparator()) continue;
        if (a->menu()) {
            collectMenu(a->menu(), title, out);
            continue;
        }
        if (a->shortcuts().isEmpty()) continue;
        QStringList keys;
        for (const QKeySequence& k : a->shortcuts()) keys << k.toString(QKeySequence::NativeText);
        out.push_back({title, plain(a->text()), keys.join(QStringLiteral(", "))});
    }
}

bool closesOverlay(const QKeyEvent* k) {
    return k->key() == Qt::Key_Escape || k->key() == Qt::Key_F1 || k->key() == Qt::Key_Question;
}
}  // namespace

ShortcutOverlay::ShortcutOverlay(QWidget* window, QMenuBar* menus) : QWidget(window), menus_(menus) {
    setObjectName(QStringLiteral("shortcutOverlay"));
    setFocusPolicy(Qt::StrongFocus);
    setAttribute(Qt::WA_NoSystemBackground);
    hide();
    window->installEventFilter(this);
}

QList<ShortcutOverlay::Entry> ShortcutOverlay::collect(QMenuBar* menus) {
    QList<Entry> out;
    for (QAction* top : menus->actions())
        if (top->menu()) collectMenu(top->menu(), plain(top->text()), out);
    return out;
}

void ShortcutOverlay::showOverlay() {
    entries_ = collect(menus_);
    setGeometry(parentWidget()->rect());
    raise();
    show();
    setFocus(Qt::ShortcutFocusReason);
}

void ShortcutOverlay::toggle() {
    if (isVisible()) hide();
    else showOverlay();
}

bool ShortcutOverlay::event(QEvent* e) {
    // Take Esc, F1 and ? before the window's shortcuts do (Esc also cancels a run there).
    if (e->type() == QEvent::ShortcutOverride && closesOverlay(static_cast<QKeyEvent*>(e))) {
        e->accept();
        return true;
    }
    return QWidget::event(e);
}

bool ShortcutOverlay::eventFilter(QObject* watched, QEvent* e) {
    if (watched == parentWidget() && e->type() == QEvent::Resize && isVisible()) setGeometry(parentWidget()->rect());
    return QWidget::eventFilter(watched, e);
}

void ShortcutOverlay::keyPressEvent(QKeyEvent* e) {
    if (closesOverlay(e)) {
        hide();
        return;
    }
    QWidget::keyPressEvent(e);
}

void ShortcutOverlay::mousePressEvent(QMouseEvent*) { hide(); }

void ShortcutOverlay::paintEvent(QPaintEvent*) {
    QPainter g(this);
    g.setRenderHint(QPainter::Antialiasing);
    const QPalette& pal = palette();
    // The window shows through: a veil in the window colour, then a panel in the base colour; both follow the
    // system palette (light or dark).
    QColor veil = pal.color(QPalette::Shadow);
    veil.setAlpha(110);
    g.fillRect(rect(), veil);

    QFont body = font();
    QFont bold = body;
    bold.setBold(true);
    QFont title = bold;
    title.setPointSizeF(body.pointSizeF() * 1.4);
    const QFontMetrics fm(body), fb(bold), ft(title);
    const int line = fm.height() + fm.height() / 3;
    const int pad = fm.height();

    // Columns of menus: each menu's heading and rows stay together.
    struct Group {
        QString menu;
        QList<const Entry*> rows;
    };
    QList<Group> groups;
    for (const Entry& e : entries_) {
        if (groups.isEmpty() || groups.back().menu != e.menu) groups.push_back({e.menu, {}});
        groups.back().rows.push_back(&e);
    }
    int keyW = 0, actW = 0;
    for (const Entry& e : entries_) {
        keyW = std::max(keyW, fb.horizontalAdvance(e.keys));
        actW = std::max(actW, fm.horizontalAdvance(e.action));
    }
    const int colW = keyW + pad + actW;
    const int maxH = height() - 4 * pad - ft.height() - line;
    QList<QList<const Group*>> columns(1);
    int used = 0;
    for (const Group& grp : groups) {
        const int h = (int(grp.rows.size()) + 1) * line + line / 2;
        if (used > 0 && used + h > maxH) {
            columns.push_back({});
            used = 0;
        }
        columns.back().push_back(&grp);
        used += h;
    }
    int tallest = 0;
    for (const auto& col : columns) {
        int h = 0;
        for (const Group* grp : col) h += (int(grp->rows.size()) + 1) * line + line / 2;
        tallest = std::max(tallest, h);
    }
    const QString hint = tr("Esc, F1 or a click to close");
    const int headerW = ft.horizontalAdvance(tr("Keyboard shortcuts")) + 3 * pad + fm.horizontalAdvance(hint);
    const int panelW = std::min(width() - 2 * pad, std::max(headerW, int(columns.size()) * (colW + 2 * pad)));
    const int panelH = std::min(height() - 2 * pad, tallest + ft.height() + line / 2 + 2 * pad);
    const QRect panel((width() - panelW) / 2, (height() - panelH) / 2, panelW, panelH);
    QColor base = pal.color(QPalette::Base);
    base.setAlpha(238);
    QPainterPath path;
    path.addRoundedRect(panel, pad / 2.0, pad / 2.0);
    g.fillPath(path, base);
    g.setPen(QPen(pal.color(QPalette::Mid), 1));
    g.drawPath(path);

    g.setPen(pal.color(QPalette::Text));
    g.setFont(title);
    g.drawText(QPoint(panel.left() + pad, panel.top() + pad + ft.ascent()), tr("Keyboard shortcuts"));
    g.setFont(body);
    QColor dim = pal.color(QPalette::Text);
    dim.setAlpha(150);
    g.setPen(dim);
    g.drawText(QPoint(panel.right() - pad - fm.horizontalAdvance(hint), panel.top() + pad + ft.ascent()), hint);

    const int top = panel.top() + pad + ft.height() + line / 2;
    for (int c = 0; c < int(columns.size()); ++c) {
        const int x = panel.left() + pad + c * (colW + 2 * pad);
        int y = top;
        for (const Group* grp : columns[c]) {
            g.setFont(bold);
            g.setPen(pal.color(QPalette::Link));
            g.drawText(QPoint(x, y + fm.ascent()), grp->menu);
            y += line;
            for (const Entry* e : grp->rows) {
                g.setFont(bold);
                g.setPen(pal.color(QPalette::Text));
                g.drawText(QRect(x, y, keyW, line), Qt::AlignRight | Qt::AlignTop, e->keys);
                g.setFont(body);
                g.drawText(QPoint(x + keyW + pad, y + fm.ascent()), e->action);
                y += line;
            }
            y += line / 2;
        }
    }
}

}  // namespace strata::ui
