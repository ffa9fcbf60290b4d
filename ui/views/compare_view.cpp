#include "views/compare_view.hpp"

#include <algorithm>
#include <cmath>

#include <QComboBox>
#include <QGridLayout>
#include <QGroupBox>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QTableWidget>
#include <QVBoxLayout>

#include "explorer/engine_client.hpp"
#include "views/heatmap_widget.hpp"
#include "views/plot_util.hpp"

namespace strata::ui {

namespace {

// A status line that may be clipped: the tooltip holds it whole.
void tell(QLabel* label, const QString& text) {
    label->setText(text);
    label->setToolTip(text);
}

QGroupBox* group(const QString& title, QWidget* content, QLayout* above = nullptr) {
    auto* g = new QGroupBox(title);
    auto* v = new QVBoxLayout(g);
    v->setContentsMargins(4, 4, 4, 4);
    if (above) v->addLayout(above);
    v->addWidget(content, 1);
    return g;
}

}  // namespace

CompareView::CompareView(ExplorerState* state, EngineClient* client, QWidget* parent)
    : ViewPage(tr("Compare prompts"), state, client, parent) {
    setTabName(tr("Compare"));
    clean_ = new QLineEdit(QString::fromUtf8(kDefaultClean));
    clean_->setObjectName(QStringLiteral("cleanPrompt"));
    clean_->setToolTip(tr("The clean prompt: the run whose activations are patched in"));
    corrupt_ = new QLineEdit(QString::fromUtf8(kDefaultCorrupt));
    corrupt_->setObjectName(QStringLiteral("corruptPrompt"));
    corrupt_->setToolTip(tr("The corrupt prompt: the same number of tokens, with the fact changed"));
    compareButton_ = new QPushButton(tr("Compare"));
    for (QLineEdit* e : {clean_, corrupt_}) e->setMinimumWidth(120);
    controls()->addWidget(new QLabel(tr("clean")));
    controls()->addWidget(clean_, 1);
    controls()->addWidget(new QLabel(tr("corrupt")));
    controls()->addWidget(corrupt_, 1);
    controls()->addWidget(compareButton_);

    // No word wrap in the scrolled canvas: a wrapping label makes the scroll area size it for its preferred
    // height (heightForWidth), not to the viewport. Long lines are clipped; their tooltips hold them whole.
    info_ = new QLabel(tr("Two prompts of the same length: press Compare."));
    info_->setMinimumWidth(10);

    normMap_ = new HeatmapWidget;
    normMap_->setScaleKind(ColorScale::Kind::Sequential);
    normMap_->setAxisNames(tr("residual"), tr("position"));
    cosMap_ = new HeatmapWidget;
    cosMap_->setScaleKind(ColorScale::Kind::Diverging);
    cosMap_->setFixedRange(-1.0f, 1.0f);
    cosMap_->setAxisNames(tr("residual"), tr("position"));
    for (HeatmapWidget* m : {normMap_, cosMap_}) m->clear(tr("Press Compare."));

    changes_ = new QTableWidget(0, 4);
    changes_->setHorizontalHeaderLabels({tr("rose"), tr("\u0394 logit"), tr("fell"), tr("\u0394 logit")});
    changes_->verticalHeader()->setVisible(false);
    changes_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    changes_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    for (int col : {1, 3}) changes_->horizontalHeader()->setSectionResizeMode(col, QHeaderView::ResizeToContents);
    changes_->setToolTip(tr("logit_corrupt \u2212 logit_clean at the last position, largest changes first"));

    // The sweep's controls.
    site_ = new QComboBox;
    site_->addItem(QStringLiteral("h"), int(PatchSite::Residual));
    site_->addItem(QStringLiteral("attention_out"), int(PatchSite::AttentionOut));
    site_->addItem(QStringLiteral("ffn_out"), int(PatchSite::FfnOut));
    site_->setToolTip(tr("Where the clean activation is patched into the corrupt run: h (the residual after the block), "
                         "attention_out or ffn_out (a branch's output before it is added)"));
    answer_ = new QComboBox;
    answer_->setEditable(true);
    answer_->setObjectName(QStringLiteral("answerPicker"));
    answer_->setToolTip(tr("The answer token (a candidate, or type a token id)"));
    foil_ = new QComboBox;
    foil_->setEditable(true);
    foil_->setObjectName(QStringLiteral("foilPicker"));
    foil_->setToolTip(tr("The foil token: the metric is logit[answer] \u2212 logit[foil] at the last position"));
    for (QComboBox* b : {answer_, foil_}) {
        b->setMinimumContentsLength(12);
        b->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    }
    scale_ = new QComboBox;
    scale_->addItem(tr("restored"));
    scale_->addItem(tr("\u0394 metric"));
    scale_->setToolTip(tr("restored: (effect \u2212 corrupt) / (clean \u2212 corrupt), 1 where the patch restores the "
                          "clean metric, 0 where it changes nothing; \u0394 metric: effect \u2212 corrupt, the metric's change in logits"));
    sweepButton_ = new QPushButton(tr("Run sweep"));
    sweepButton_->setObjectName(QStringLiteral("runSweep"));
    sweepButton_->setEnabled(false);
    cancel_ = new QPushButton(tr("Cancel"));
    cancel_->setEnabled(false);
    progress_ = new QProgressBar;
    progress_->setMaximumWidth(140);
    progress_->setTextVisible(true);
    progress_->setValue(0);
    auto* sweepRow = new QHBoxLayout;
    sweepRow->addWidget(new QLabel(tr("site")));
    sweepRow->addWidget(site_);
    sweepRow->addWidget(new QLabel(tr("answer")));
    sweepRow->addWidget(answer_);
    sweepRow->addWidget(new QLabel(tr("foil")));
    sweepRow->addWidget(foil_);
    sweepRow->addWidget(scale_);
    sweepRow->addStretch(1);
    auto* sweepRow2 = new QHBoxLayout;
    sweepRow2->addWidget(sweepButton_);
    sweepRow2->addWidget(cancel_);
    sweepRow2->addWidget(progress_);
    sweepInfo_ = new QLabel;
    sweepInfo_->setMinimumWidth(10);
    sweepRow2->addWidget(sweepInfo_, 1);
    auto* sweepControls = new QVBoxLayout;
    sweepControls->addLayout(sweepRow);
    sweepControls->addLayout(sweepRow2);
    sweepMap_ = new HeatmapWidget;
    sweepMap_->setObjectName(QStringLiteral("sweepMap"));
    sweepMap_->setScaleKind(ColorScale::Kind::Diverging);
    sweepMap_->setAxisNames(tr("layer"), tr("position"));
    sweepMap_->clear(tr("Compare two prompts of the same length, choose the answer and the foil, and run the sweep."));

    auto* canvas = new QWidget;
    auto* grid = new QGridLayout(canvas);
    grid->setContentsMargins(0, 0, 0, 0);
    grid->addWidget(info_, 0, 0, 1, 2);
    grid->addWidget(group(tr("\u2016h_corrupt \u2212 h_clean\u2016 per residual and position"), normMap_), 1, 0);
    grid->addWidget(group(tr("cos(h_clean, h_corrupt)"), cosMap_), 1, 1);
    grid->addWidget(group(tr("Logits at the last position: corrupt \u2212 clean"), changes_), 2, 0);
    grid->addWidget(group(tr("Patching sweep: logit[answer] \u2212 logit[foil] with the clean activation patched in"), sweepMap_, sweepControls), 2, 1);
    grid->setRowStretch(1, 2);
    grid->setRowStretch(2, 5);
    grid->setColumnStretch(0, 1);
    grid->setColumnStretch(1, 2);
    // Scrolls rather than forcing its size on the window: four panels need room a small window does not have.
    canvas->setMinimumSize(700, 440);
    auto* scroll = new QScrollArea;
    scroll->setWidget(canvas);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    setCanvas(scroll);
    setReadout(tr("Hover a map to read values."));

    connect(compareButton_, &QPushButton::clicked, this, &CompareView::compare);
    for (QLineEdit* e : {clean_, corrupt_}) connect(e, &QLineEdit::returnPressed, this, &CompareView::compare);
    connect(sweepButton_, &QPushButton::clicked, this, &CompareView::runSweep);
    connect(cancel_, &QPushButton::clicked, this, &CompareView::cancelSweep);
    connect(scale_, &QComboBox::currentIndexChanged, this, &CompareView::showSweep);
    for (HeatmapWidget* m : {normMap_, cosMap_, sweepMap_})
        connect(m, &HeatmapWidget::hoverChanged, this, [this](const QString& s) {
            if (!s.isEmpty()) setReadout(s);
        });
    connect(client_, &EngineClient::compareFinished, this, &CompareView::onCompare);
    connect(client_, &EngineClient::sweepFinished, this, &CompareView::onSweep);
    connect(client_, &EngineClient::sweepProgress, this, [this](qint64 id, qint64 done, qint64 total) {
        if (id != sweepId_) return;
        progress_->setRange(0, int(total));
        progress_->setValue(int(done));
        tell(sweepInfo_, tr("%1 of %2 patched runs").arg(done).arg(total));
    });
    connect(client_, &EngineClient::cancelled, this, [this](qint64 id, const QString&) {
        if (id == compareId_) compareId_ = 0;
        if (id != sweepId_) return;
        setSweeping(false);
        tell(sweepInfo_, tr("Cancelled."));
        emit sweepCancelled();
    });
    connect(client_, &EngineClient::failed, this, [this](qint64 id, const QString&, const QString& message) {
        if (id == compareId_) {
            compareId_ = 0;
            tell(info_, tr("<b>Cannot compare</b>: %1").arg(message.toHtmlEscaped()));
        }
        if (id == sweepId_) {
            setSweeping(false);
            tell(sweepInfo_, tr("Failed: %1").arg(message));
        }
    });
    connect(state_, &ExplorerState::modelChanged, this, [this] {
        compare_.reset();
        sweep_.reset();
        for (HeatmapWidget* m : {normMap_, cosMap_, sweepMap_}) m->clear(tr("Press Compare."));
        changes_->setRowCount(0);
        sweepButton_->setEnabled(false);
    });
}

void CompareView::setPrompts(const QString& clean, const QString& corrupt) {
    clean_->setText(clean);
    corrupt_->setText(corrupt);
}

void CompareView::compare() {
    if (!state_->model()) return;
    compareId_ = client_->compare(clean_->text(), corrupt_->text(), state_->ablations());
    tell(info_, tr("Running both prompts\u2026"));
}

bool CompareView::hasContent() const { return normMap_->rows() > 0 || sweepMap_->rows() > 0; }

QStringList CompareView::positionLabels() const {
    QStringList out;
    if (!compare_) return out;
    for (int i = 0; i < compare_->cleanTexts.size(); ++i) {
        const QString a = compare_->cleanTexts[i], b = compare_->corruptTexts.value(i);
        out << (a == b ? a : QStringLiteral("%1\u2192%2").arg(a, b));
    }
    return out;
}

void CompareView::onCompare(const CompareResultPtr& r) {
    if (!r || r->id != compareId_) return;
    compareId_ = 0;
    compare_ = r;
    const QString ablated = r->ablations.empty() ? QString() : tr(" With the ablations in force in both runs.");
    if (!r->problem.isEmpty()) {
        tell(info_, r->problem + ablated);
        for (HeatmapWidget* m : {normMap_, cosMap_}) m->clear(r->problem);
    } else {
        tell(info_, tr("%1 tokens each; they differ at %2.%3")
                           .arg(r->positions)
                           .arg([&] {
                               QStringList at;
                               for (int i = 0; i < r->cleanTexts.size(); ++i)
                                   if (r->cleanTokens[size_t(i)] != r->corruptTokens[size_t(i)]) at << tr("position %1").arg(i);
                               return at.isEmpty() ? tr("no position (the prompts are the same)") : at.join(QStringLiteral(", "));
                           }())
                           .arg(ablated));
        QStringList rows{QStringLiteral("x0")};
        for (int l = 0; l + 1 < r->rows; ++l) rows << QStringLiteral("h.%1").arg(l);
        // Positions are labelled under the sweep; here the hover read-out names them (room for the sweep).
        for (HeatmapWidget* m : {normMap_, cosMap_}) m->setRowLabels(rows);
        normMap_->setMatrix(r->diffNorm, r->rows, r->positions);
        cosMap_->setMatrix(r->cosine, r->rows, r->positions);
    }
    // Rose and fell, side by side.
    const int n = int(std::max(r->rose.size(), r->fell.size()));
    changes_->setRowCount(n);
    auto cell = [&](int row, int col, const QString& text, const QColor& colour) {
        auto* it = new QTableWidgetItem(text);
        if (colour.isValid()) it->setForeground(colour);
        changes_->setItem(row, col, it);
    };
    for (int i = 0; i < n; ++i) {
        if (i < int(r->rose.size())) {
            const auto& c = r->rose[size_t(i)];
            cell(i, 0, QStringLiteral("%1 (%2)").arg(r->vocabText.at(c.id)).arg(c.id), {});
            cell(i, 1, QStringLiteral("+%1").arg(formatValue(c.corrupt - c.clean)), QColor(0xc0, 0x1c, 0x28));
            changes_->item(i, 1)->setToolTip(tr("logit %1 (clean) \u2192 %2 (corrupt)").arg(formatValue(c.clean), formatValue(c.corrupt)));
        }
        if (i < int(r->fell.size())) {
            const auto& c = r->fell[size_t(i)];
            cell(i, 2, QStringLiteral("%1 (%2)").arg(r->vocabText.at(c.id)).arg(c.id), {});
            cell(i, 3, formatValue(c.corrupt - c.clean), QColor(0x1c, 0x4f, 0xc0));
            changes_->item(i, 3)->setToolTip(tr("logit %1 (clean) \u2192 %2 (corrupt)").arg(formatValue(c.clean), formatValue(c.corrupt)));
        }
    }
    // Answer: the clean run's favourite; foil: the corrupt run's (the second candidate when they agree).
    const int32_t answer = r->candidates.empty() ? 0 : r->candidates.front();
    int32_t foil = answer;
    for (const auto& c : r->rose)
        if (c.id != answer) {
            foil = c.id;
            break;
        }
    fillPicker(answer_, answer);
    fillPicker(foil_, foil);
    sweepButton_->setEnabled(r->problem.isEmpty() && !sweeping());
    emit compareReady();
}

void CompareView::fillPicker(QComboBox* box, int32_t select) {
    box->clear();
    if (!compare_) return;
    std::vector<int32_t> ids = compare_->candidates;
    for (const auto* list : {&compare_->rose, &compare_->fell})
        for (const auto& c : *list)
            if (std::find(ids.begin(), ids.end(), c.id) == ids.end()) ids.push_back(c.id);
    for (int32_t id : ids) box->addItem(QStringLiteral("%1 (%2)").arg(compare_->vocabText.at(id)).arg(id), id);
    const int i = box->findData(select);
    if (i >= 0) box->setCurrentIndex(i);
}

int32_t CompareView::pickerId(const QComboBox* box) const {
    const QString text = box->currentText().trimmed();
    const int i = box->findText(text);
    if (i >= 0) return box->itemData(i).toInt();
    // A typed id, alone or as "text (id)".
    bool ok = false;
    const int id = text.toInt(&ok);
    if (ok) return id;
    const int open = text.lastIndexOf(QLatin1Char('(')), close = text.lastIndexOf(QLatin1Char(')'));
    if (open >= 0 && close > open) {
        const int v = text.mid(open + 1, close - open - 1).toInt(&ok);
        if (ok) return v;
    }
    return -1;
}

void CompareView::setAnswer(int32_t id) {
    const int i = answer_->findData(id);
    if (i >= 0) answer_->setCurrentIndex(i);
    else answer_->setEditText(QString::number(id));
}

void CompareView::setFoil(int32_t id) {
    const int i = foil_->findData(id);
    if (i >= 0) foil_->setCurrentIndex(i);
    else foil_->setEditText(QString::number(id));
}

void CompareView::setSite(PatchSite site) { site_->setCurrentIndex(site_->findData(int(site))); }

void CompareView::setScaleMode(int mode) { scale_->setCurrentIndex(std::clamp(mode, 0, 1)); }

void CompareView::setSweeping(bool on) {
    if (!on) sweepId_ = 0;
    sweepButton_->setEnabled(!on && compare_ && compare_->problem.isEmpty());
    cancel_->setEnabled(on);
    compareButton_->setEnabled(!on);
}

void CompareView::runSweep() {
    if (!compare_ || !compare_->problem.isEmpty() || sweeping()) return;
    const int32_t answer = pickerId(answer_), foil = pickerId(foil_);
    if (answer < 0 || foil < 0) {
        tell(sweepInfo_, tr("Choose the answer and the foil (a candidate, or a token id)."));
        return;
    }
    sweepId_ = client_->patchSweep(compare_->cleanTokens, compare_->corruptTokens, answer, foil,
                                   PatchSite(site_->currentData().toInt()), state_->ablations());
    const int64_t total = (compare_->rows - 1) * compare_->positions;
    progress_->setRange(0, int(total));
    progress_->setValue(0);
    tell(sweepInfo_, tr("Patching %1 activations\u2026").arg(total));
    setSweeping(true);
}

void CompareView::cancelSweep() {
    if (sweeping()) client_->cancelUpTo(sweepId_);
}

void CompareView::onSweep(const SweepResultPtr& r) {
    if (!r || r->id != sweepId_) return;
    setSweeping(false);
    sweep_ = r;
    progress_->setValue(progress_->maximum());
    showSweep();
    emit sweepReady();
}

QString CompareView::sweepStatus() const { return sweepInfo_->text(); }

void CompareView::showSweep() {
    if (!sweep_) return;
    const PatchSweep& s = sweep_->sweep;
    const int64_t L = int64_t(s.effect.size()), T = L ? int64_t(s.effect.front().size()) : 0;
    const bool fraction = scale_->currentIndex() == 0;
    const double span = s.clean - s.corrupt;
    std::vector<float> data(size_t(L * T));  // [L, T]
    float m = 0.0f;
    for (int64_t l = 0; l < L; ++l)
        for (int64_t p = 0; p < T; ++p) {
            const double d = s.effect[size_t(l)][size_t(p)] - s.corrupt;
            const float v = fraction ? (std::fabs(span) > 1e-12 ? float(d / span) : 0.0f) : float(d);
            data[size_t(l * T + p)] = v;
            m = std::max(m, std::fabs(v));
        }
    QStringList rows;
    for (int64_t l = 0; l < L; ++l) rows << QString::fromStdString(patch_site_name(s.site, l));
    sweepMap_->setScaleKind(ColorScale::Kind::Diverging);
    sweepMap_->setRowLabels(rows);
    sweepMap_->setColumnLabels(positionLabels());
    sweepMap_->setMatrix(std::move(data), L, T);
    // Centred on the corrupt run's metric (0 = no change); the fraction's scale is fixed so 1 means restored.
    if (fraction) sweepMap_->setFixedRange(-1.0f, 1.0f);
    else sweepMap_->setFixedRange(-std::max(m, 1e-6f), std::max(m, 1e-6f));
    tell(sweepInfo_, tr("logit[%1] \u2212 logit[%2]: clean %3, corrupt %4 \u00b7 %5 runs, %6 s%7")
                            .arg(sweep_->answerText, sweep_->foilText, formatValue(s.clean), formatValue(s.corrupt))
                            .arg(L * T)
                            .arg(sweep_->seconds, 0, 'f', 2)
                            .arg(sweep_->ablations.empty() ? QString() : tr(" \u00b7 ablations in force")));
}

ViewPage::TensorExport CompareView::tensorExport() const {
    TensorExport e;
    if (sweep_) {
        const PatchSweep& s = sweep_->sweep;
        e.name = QStringLiteral("patch_sweep.%1").arg(site_->currentText().section(QLatin1Char(' '), 0, 0));
        for (const auto& row : s.effect)
            for (double v : row) e.data.push_back(float(v));
        e.shape = {int64_t(s.effect.size()), s.effect.empty() ? 0 : int64_t(s.effect.front().size())};
    } else if (compare_ && compare_->positions > 0) {
        e.name = QStringLiteral("residual_diff_norm");
        e.data = compare_->diffNorm;
        e.shape = {compare_->rows, compare_->positions};
    }
    return e;
}

}  // namespace strata::ui
