#include "explorer/token_chips.hpp"

#include <QHBoxLayout>
#include <QLabel>
#include <QToolButton>

namespace strata::ui {

TokenChips::TokenChips(QWidget* parent) : QScrollArea(parent) {
    strip_ = new QWidget;
    layout_ = new QHBoxLayout(strip_);
    layout_->setContentsMargins(2, 2, 2, 2);
    layout_->setSpacing(3);
    layout_->addStretch(1);
    setWidget(strip_);
    setWidgetResizable(true);
    setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    setFrameShape(QFrame::NoFrame);
    const int h = 2 * fontMetrics().height() + 22;
    setFixedHeight(h + 14);
}

void TokenChips::setTokens(const QStringList& texts, const std::vector<int32_t>& ids) {
    for (QToolButton* b : chips_) b->deleteLater();
    chips_.clear();
    const QString style = QStringLiteral(
        "QToolButton { border: 1px solid palette(mid); border-radius: 6px; padding: 2px 6px; background: palette(base); }"
        "QToolButton:checked { background: palette(highlight); color: palette(highlighted-text); "
        "border-color: palette(highlight); }"
        "QToolButton:hover:!checked { border-color: palette(highlight); }");
    for (int i = 0; i < texts.size(); ++i) {
        auto* b = new QToolButton;
        b->setCheckable(true);
        b->setAutoRaise(false);
        b->setToolButtonStyle(Qt::ToolButtonTextOnly);
        b->setText(QStringLiteral("%1\n%2").arg(texts[i]).arg(i < int(ids.size()) ? ids[size_t(i)] : 0));
        b->setToolTip(tr("position %1 \u00b7 token id %2 \u00b7 \u2018%3\u2019").arg(i).arg(i < int(ids.size()) ? ids[size_t(i)] : 0).arg(texts[i]));
        b->setStyleSheet(style);
        connect(b, &QToolButton::clicked, this, [this, i] { emit chipClicked(i); });
        layout_->insertWidget(i, b);
        chips_.push_back(b);
    }
}

void TokenChips::setSelected(int position) {
    for (int i = 0; i < int(chips_.size()); ++i) chips_[size_t(i)]->setChecked(i == position);
    if (position >= 0 && position < int(chips_.size())) ensureWidgetVisible(chips_[size_t(position)]);
}

}  // namespace strata::ui
