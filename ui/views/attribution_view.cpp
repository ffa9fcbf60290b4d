#include "views/attribution_view.hpp"

#include <algorithm>
#include <cmath>

#include <QComboBox>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QTimer>
#include <QVBoxLayout>

#include "explorer/engine_client.hpp"
#include "views/plot_util.hpp"

namespace strata::ui {

AttributionView::AttributionView(ExplorerState* state, EngineClient* client, QWidget* parent)
    : ViewPage(tr("Direct logit attribution"), state, client, parent) {
    setTabName(tr("Attribution"));
    position_ = new QSpinBox;
    position_->setPrefix(tr("position "));
    position_->setRange(0, 0);
    position_->setToolTip(tr("The position whose next-token logit is attributed (follows the selected token)"));
    target_ = new QComboBox;
    target_->setObjectName(QStringLiteral("attributionTarget"));
    target_->setMinimumContentsLength(14);
    target_->setToolTip(tr("The token whose logit is attributed: the position's top tokens, the most likely first"));
    sort_ = new QComboBox;
    sort_->addItem(tr("sorted by |value|"));
    sort_->addItem(tr("in layer order"));
    auto* go = new QPushButton(tr("Attribute"));
    controls()->addWidget(position_);
    controls()->addWidget(new QLabel(tr("target")));
    controls()->addWidget(target_);
    controls()->addWidget(sort_);
    controls()->addStretch(1);
    controls()->addWidget(go);

    summary_ = new QLabel(tr("Run a prompt to attribute its logits."));
    summary_->setWordWrap(true);
    summary_->setTextFormat(Qt::RichText);
    bars_ = new AttributionBars;
    scroll_ = new QScrollArea;
    scroll_->setWidget(bars_);
    scroll_->setWidgetResizable(true);
    auto* canvas = new QWidget;
    auto* v = new QVBoxLayout(canvas);
    v->setContentsMargins(0, 0, 0, 0);
    v->addWidget(summary_);
    v->addWidget(scroll_, 1);
    setCanvas(canvas);
    setReadout(tr("Click a bar to open that component's tensor."));

    connect(go, &QPushButton::clicked, this, [this] { attribute(position_->value(), target_->currentData().toInt()); });
    connect(target_, &QComboBox::activated, this, [this] { attribute(position_->value(), target_->currentData().toInt()); });
    connect(position_, &QSpinBox::valueChanged, this, [this](int p) {
        if (state_->position() != p) state_->setPosition(p);
    });
    connect(sort_, &QComboBox::currentIndexChanged, this, [this] {
        if (result_) onResult(result_);
    });
    connect(bars_, &AttributionBars::barClicked, this, &AttributionView::componentRequested);
    connect(bars_, &AttributionBars::hoverChanged, this, [this](const QString& s) {
        if (!s.isEmpty()) setReadout(s);
    });
    connect(client_, &EngineClient::attributionFinished, this, &AttributionView::onResult);
    connect(client_, &EngineClient::failed, this, [this](qint64 id, const QString&, const QString& message) {
        if (id != pending_) return;
        pending_ = 0;
        summary_->setText(tr("<b>Cannot attribute</b>: %1").arg(message.toHtmlEscaped()));
    });
    connect(client_, &EngineClient::cancelled, this, [this](qint64 id, const QString&) {
        if (id == pending_) pending_ = 0;
    });
    connect(state_, &ExplorerState::runChanged, this, [this] {
        fillTargets(state_->position());
        scheduleAuto();
    });
    connect(state_, &ExplorerState::positionChanged, this, [this](int p) {
        fillTargets(p);
        scheduleAuto();
    });
}

void AttributionView::setSortByMagnitude(bool on) { sort_->setCurrentIndex(on ? 0 : 1); }

bool AttributionView::hasContent() const { return bars_->count() > 0; }

void AttributionView::showEvent(QShowEvent* e) {
    ViewPage::showEvent(e);
    if (stale_) scheduleAuto();
}

void AttributionView::scheduleAuto() {
    stale_ = true;
    if (!isVisible() || !state_->run()) return;
    // After the current events (a run and its position arrive together): one request for both.
    QTimer::singleShot(0, this, [this] {
        if (stale_ && isVisible() && state_->run()) attribute(state_->position(), -1);
    });
}

void AttributionView::fillTargets(int position) {
    const RunResultPtr& run = state_->run();
    const QSignalBlocker b1(target_), b2(position_);
    target_->clear();
    if (!run) return;
    position_->setRange(0, std::max(0, int(run->tokens.size()) - 1));
    position_->setValue(position);
    if (position < 0 || position >= int(run->trace.top_k.size())) return;
    for (const TokenScore& s : run->trace.top_k[size_t(position)]) {
        const auto it = run->vocabText.find(s.id);
        target_->addItem(QStringLiteral("%1 (%2)").arg(it == run->vocabText.end() ? QString() : it->second).arg(s.id), s.id);
    }
}

void AttributionView::attribute(int position, int32_t target) {
    const RunResultPtr& run = state_->run();
    if (!run) return;
    if (position < 0) position = state_->position();
    if (target < 0) {
        // The most likely next token at the position, as the run's top-k has it.
        if (position < int(run->trace.top_k.size()) && !run->trace.top_k[size_t(position)].empty())
            target = run->trace.top_k[size_t(position)].front().id;
        else
            return;
    }
    stale_ = false;
    pending_ = client_->attribute(run->tokens, target, position, state_->ablations());
    summary_->setText(tr("Attributing the logit of token %1 at position %2\u2026").arg(target).arg(position));
}

void AttributionView::onResult(const AttributionResultPtr& r) {
    if (!r) return;
    if (r != result_) {
        if (r->id != pending_) return;
        pending_ = 0;
        result_ = r;
    }
    const Attribution& a = r->attribution;
    double sum = 0;
    std::vector<AttributionBars::Bar> bars;
    for (const AttributionComponent& c : a.components) {
        bars.push_back({QString::fromStdString(c.name), c.value});
        sum += c.value;
    }
    const bool byMagnitude = sort_->currentIndex() == 0;
    bars_->setBars(std::move(bars), byMagnitude);
    // Keep the combo on the attributed token when it is there.
    if (const int i = target_->findData(a.target); i >= 0) {
        const QSignalBlocker b(target_);
        target_->setCurrentIndex(i);
    }
    summary_->setText(summary());
    emit ready();
}

QString AttributionView::summary() const {
    if (!result_) return {};
    const Attribution& a = result_->attribution;
    double sum = 0;
    for (const AttributionComponent& c : a.components) sum += c.value;
    return tr("Logit of <b>%1</b> (%2) at position %3 \u2018%4\u2019: <b>%5</b> \u00b7 sum of the %6 components: <b>%7</b> "
              "(difference %8) \u00b7 final norm scale held at %9%10")
        .arg(result_->targetText.toHtmlEscaped())
        .arg(a.target)
        .arg(a.position)
        .arg(result_->tokenTexts.value(int(a.position)).toHtmlEscaped())
        .arg(formatValue(a.logit))
        .arg(a.components.size())
        .arg(formatValue(sum))
        .arg(formatValue(sum - a.logit))
        .arg(formatValue(a.scale))
        .arg(result_->ablations.empty() ? QString() : tr(" \u00b7 with the ablations in force"));
}

ViewPage::TensorExport AttributionView::tensorExport() const {
    TensorExport e;
    if (!result_) return e;
    e.name = QStringLiteral("attribution.%1@%2").arg(result_->attribution.target).arg(result_->attribution.position);
    for (const AttributionComponent& c : result_->attribution.components) e.data.push_back(float(c.value));
    e.shape = {int64_t(e.data.size())};  // in the engine's order: x0, then per layer its heads, then feed_forward
    return e;
}

// ------------------------------------------------------------------------------------------------ the bars

AttributionBars::AttributionBars(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    message_ = tr("no attribution yet");
}

void AttributionBars::setBars(std::vector<Bar> bars, bool byMagnitude) {
    if (byMagnitude)
        std::stable_sort(bars.begin(), bars.end(), [](const Bar& a, const Bar& b) { return std::fabs(a.value) > std::fabs(b.value); });
    bars_ = std::move(bars);
    max_ = 1e-12;
    for (const Bar& b : bars_) max_ = std::max(max_, std::fabs(b.value));
    message_.clear();
    updateGeometry();
    update();
}

void AttributionBars::clear(const QString& message) {
    bars_.clear();
    message_ = message;
    updateGeometry();
    update();
}

int AttributionBars::rowHeight() const { return fontMetrics().height() + 4; }

int AttributionBars::labelWidth() const {
    int w = fontMetrics().horizontalAdvance(QStringLiteral("layers.00.attention.heads.00"));
    return w + 12;
}

QSize AttributionBars::sizeHint() const { return {600, std::max(120, int(bars_.size()) * rowHeight() + 8)}; }

QRect AttributionBars::barRect(int i) const { return QRect(0, 4 + i * rowHeight(), width(), rowHeight()); }

int AttributionBars::rowAt(QPoint p) const {
    const int i = (p.y() - 4) / rowHeight();
    return p.y() >= 4 && i >= 0 && i < int(bars_.size()) ? i : -1;
}

void AttributionBars::paintEvent(QPaintEvent* e) {
    QPainter g(this);
    g.fillRect(rect(), palette().base());
    if (bars_.empty()) {
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(rect().adjusted(8, 8, -8, -8), Qt::AlignCenter | Qt::TextWordWrap, message_);
        return;
    }
    const QFontMetrics fm(font());
    const int lw = labelWidth(), vw = fm.horizontalAdvance(QStringLiteral("-00.000")) + 12;
    const int x0 = lw, x1 = std::max(lw + 40, width() - vw);
    const double mid = (x0 + x1) / 2.0, half = (x1 - x0) / 2.0 - 2;
    const int first = std::max(0, (e->rect().top() - 4) / rowHeight()), last = std::min(int(bars_.size()) - 1, (e->rect().bottom() - 4) / rowHeight());
    for (int i = first; i <= last; ++i) {
        const Bar& b = bars_[size_t(i)];
        const QRect row = barRect(i);
        if (i % 2) g.fillRect(row, faintText(palette(), 12));
        g.setPen(palette().color(QPalette::Text));
        g.drawText(QRect(4, row.top(), lw - 8, row.height()), Qt::AlignRight | Qt::AlignVCenter, fm.elidedText(b.name, Qt::ElideLeft, lw - 8));
        const double w = b.value / max_ * half;
        const QRectF bar = w >= 0 ? QRectF(mid, row.top() + 2, w, row.height() - 4) : QRectF(mid + w, row.top() + 2, -w, row.height() - 4);
        g.fillRect(bar, b.value >= 0 ? QColor(0xd0, 0x3a, 0x3a) : QColor(0x35, 0x6a, 0xc4));
        g.drawText(QRect(x1 + 6, row.top(), vw - 6, row.height()), Qt::AlignLeft | Qt::AlignVCenter, formatValue(b.value));
    }
    g.setPen(faintText(palette(), 120));
    g.drawLine(QPointF(mid, 0), QPointF(mid, height()));
}

void AttributionBars::mouseMoveEvent(QMouseEvent* e) {
    const int i = rowAt(e->position().toPoint());
    if (i < 0) return;
    emit hoverChanged(tr("%1: %2 of the logit (rank %3 by this order)").arg(bars_[size_t(i)].name, formatValue(bars_[size_t(i)].value)).arg(i + 1));
}

void AttributionBars::mousePressEvent(QMouseEvent* e) {
    const int i = rowAt(e->position().toPoint());
    if (i >= 0 && e->button() == Qt::LeftButton) emit barClicked(bars_[size_t(i)].name);
}

}  // namespace strata::ui
