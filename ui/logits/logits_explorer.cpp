#include "logits/logits_explorer.hpp"

#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "logits/distribution_plots.hpp"
#include "logits/logits_source.hpp"
#include "logits/sampling_controls.hpp"
#include "logits/token_table_model.hpp"

namespace strata::ui {

namespace {
QTableView* makeTable(TokenTableModel* model) {
    auto* t = new QTableView;
    t->setModel(model);
    t->setSelectionBehavior(QAbstractItemView::SelectRows);
    t->setAlternatingRowColors(true);
    t->verticalHeader()->hide();
    t->verticalHeader()->setDefaultSectionSize(t->fontMetrics().height() + 6);
    t->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    t->horizontalHeader()->setSectionResizeMode(TokenTableModel::TokenColumn, QHeaderView::Stretch);
    return t;
}
}  // namespace

LogitsExplorer::LogitsExplorer(ExplorerState* state, EngineClient* client, LogitsSource* source, QWidget* parent)
    : ViewPage(tr("Logits explorer"), state, client, parent), source_(source) {
    sampling_ = new SamplingControls(Qt::Horizontal);
    sampling_->setToolTip(tr("The sampler's settings, applied live to this position's distribution"));
    rows_ = new QSpinBox;
    rows_->setRange(5, 200);
    rows_->setValue(20);
    rows_->setToolTip(tr("How many of the most likely tokens the table and the bars show"));
    controls()->addWidget(sampling_);
    controls()->addSpacing(10);
    controls()->addWidget(new QLabel(tr("rows")));
    controls()->addWidget(rows_);
    controls()->addStretch(1);

    heading_ = new QLabel;
    heading_->setWordWrap(true);
    heading_->setTextFormat(Qt::RichText);

    topModel_ = new TokenTableModel(this);
    foundModel_ = new TokenTableModel(this);
    topTable_ = makeTable(topModel_);
    foundTable_ = makeTable(foundModel_);
    foundTable_->setMaximumHeight(foundTable_->fontMetrics().height() * 9);
    search_ = new QLineEdit;
    search_->setPlaceholderText(tr("Find a token by text or id (\u201c Paris\u201d, \u201cthe\u201d, 12366)"));
    search_->setClearButtonEnabled(true);
    searchNote_ = new QLabel;

    auto* left = new QWidget;
    auto* lv = new QVBoxLayout(left);
    lv->setContentsMargins(0, 0, 0, 0);
    lv->addWidget(topTable_, 1);
    lv->addWidget(search_);
    lv->addWidget(searchNote_);
    lv->addWidget(foundTable_);

    bars_ = new DistributionBars;
    plot_ = new RankPlot;
    auto* right = new QSplitter(Qt::Vertical);
    right->addWidget(bars_);
    right->addWidget(plot_);
    right->setSizes({420, 340});

    auto* split = new QSplitter(Qt::Horizontal);
    split->addWidget(left);
    split->addWidget(right);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setSizes({480, 320});

    auto* canvas = new QWidget;
    auto* cv = new QVBoxLayout(canvas);
    cv->setContentsMargins(0, 0, 0, 0);
    cv->addWidget(heading_);
    cv->addWidget(split, 1);
    setCanvas(canvas);
    setReadout(tr("Hover the bars or the plot for a token's numbers; change the settings to see what the sampler would keep."));

    connect(source_, &LogitsSource::logitsChanged, this, &LogitsExplorer::onLogits);
    connect(source_, &LogitsSource::busyChanged, this, &LogitsExplorer::updateHeading);
    connect(sampling_, &SamplingControls::changed, this, [this](const SamplerSettings& s) {
        dist_.setSampling(s);
        topModel_->refresh();
        foundModel_->refresh();
        redraw();
    });
    connect(rows_, &QSpinBox::valueChanged, this, [this] {
        onLogits();
    });
    connect(search_, &QLineEdit::textChanged, this, &LogitsExplorer::find);
    connect(bars_, &DistributionBars::hoverText, this, &LogitsExplorer::setReadout);
    connect(plot_, &RankPlot::hoverText, this, &LogitsExplorer::setReadout);
    dist_.setSampling(sampling_->settings());
    onLogits();
}

void LogitsExplorer::showEvent(QShowEvent* e) {
    ViewPage::showEvent(e);
    source_->setActive(this, true);
}

void LogitsExplorer::hideEvent(QHideEvent* e) {
    ViewPage::hideEvent(e);
    source_->setActive(this, false);
}

bool LogitsExplorer::hasContent() const { return !dist_.empty(); }

void LogitsExplorer::setSampling(const SamplerSettings& s) { sampling_->setSettings(s); }

void LogitsExplorer::setRows(int rows) { rows_->setValue(rows); }

void LogitsExplorer::onLogits() {
    const PositionLogitsPtr& r = source_->logits();
    if (!r) {
        if (shownId_ != -1) {
            dist_.setLogits({});
            shownId_ = -1;
        }
    } else if (r->id != shownId_) {
        dist_.setLogits(r->logits);
        shownId_ = r->id;
    }
    const int32_t next = source_->actualNext();
    std::vector<int32_t> top;
    for (int64_t i = 0; i < std::min<int64_t>(rows_->value(), dist_.size()); ++i) top.push_back(dist_.idAt(i));
    topModel_->setRows(&dist_, source_->vocab(), top, next);
    find(search_->text());
    redraw();
}

void LogitsExplorer::find(const QString& query) {
    if (search_->text() != query) {
        search_->setText(query);  // comes back here through textChanged
        return;
    }
    const VocabularyPtr vocab = source_->vocab();
    if (query.isEmpty() || !vocab || dist_.empty()) {
        foundModel_->setRows(&dist_, vocab, {}, -1);
        searchNote_->setText(query.isEmpty() ? QString() : tr("waiting for the distribution"));
        return;
    }
    const std::vector<int32_t> ids = dist_.find(query, *vocab, 50);
    foundModel_->setRows(&dist_, vocab, ids, source_->actualNext());
    searchNote_->setText(ids.empty() ? tr("no token matches \u201c%1\u201d").arg(query.toHtmlEscaped())
                                     : tr("%1 matching %2, most likely first").arg(ids.size()).arg(ids.size() == 1 ? tr("token") : tr("tokens")));
}

void LogitsExplorer::redraw() {
    bars_->setData(&dist_, source_->vocab(), rows_->value(), source_->actualNext());
    plot_->setData(&dist_, source_->vocab(), source_->actualNext());
    updateHeading();
}

QString LogitsExplorer::heading() const { return heading_->text(); }

void LogitsExplorer::updateHeading() {
    const RunResultPtr& run = state_->run();
    if (!run) {
        heading_->setText(tr("Run a prompt, or click a token the chat generated, to see the next-token distribution."));
        return;
    }
    const int p = source_->position();
    QString text = tr("After position %1 <b>\u2018%2\u2019</b>").arg(p).arg(run->tokenTexts.value(p).toHtmlEscaped());
    if (dist_.empty()) {
        text += source_->busy() ? tr(" \u2014 reading the logits\u2026") : source_->error().isEmpty() ? QString() : QStringLiteral(" \u2014 ") + source_->error().toHtmlEscaped();
        heading_->setText(text);
        return;
    }
    const int32_t next = source_->actualNext();
    if (next >= 0 && next < dist_.size())
        text += tr(": the text goes on with <b>\u2018%1\u2019</b> (id %2), rank %3, p = %4, after the settings %5")
                    .arg(run->tokenTexts.value(p + 1).toHtmlEscaped())
                    .arg(next)
                    .arg(dist_.rankOf(next) + 1)
                    .arg(formatPercent(dist_.prob(next)))
                    .arg(dist_.survives(next) ? formatPercent(dist_.sampledProb(next)) : tr("removed"));
    else
        text += tr(": the end of the text, what would come next");
    text += tr(" \u00b7 entropy %1 nats, perplexity %2").arg(dist_.entropy(), 0, 'f', 3).arg(dist_.perplexity(), 0, 'f', 1);
    heading_->setText(text);
}

ViewPage::TensorExport LogitsExplorer::tensorExport() const {
    TensorExport e;
    if (dist_.empty()) return e;
    e.name = QStringLiteral("logits_position_%1").arg(source_->position());
    e.data = dist_.logits();
    e.shape = {int64_t(e.data.size())};
    return e;
}

}  // namespace strata::ui
