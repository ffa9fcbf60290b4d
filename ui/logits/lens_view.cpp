#include "logits/lens_view.hpp"

#include <QBrush>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "logits/lens_plot.hpp"
#include "logits/logits_source.hpp"
#include "logits/token_table_model.hpp"

namespace strata::ui {

// ---------------------------------------------------------------------------------------------- table

LensTableModel::LensTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void LensTableModel::setLens(std::vector<lens::RowSummary> rows, const VocabularyPtr& vocab) {
    beginResetModel();
    rows_ = std::move(rows);
    vocab_ = vocab;
    track_ = {};
    endResetModel();
}

void LensTableModel::setTrack(const QString& token, lens::TokenTrack track) {
    token_ = token;
    track_ = std::move(track);
    emit headerDataChanged(Qt::Horizontal, RankColumn, ProbColumn);
    if (!rows_.empty()) emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
}

int LensTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(rows_.size()); }

int LensTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant LensTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    if (section == RowColumn) return tr("residual");
    if (section >= FirstTopColumn && section < FirstTopColumn + kTop) return tr("top %1").arg(section - FirstTopColumn + 1);
    if (section == RankColumn) return tr("rank of \u2018%1\u2019").arg(token_);
    if (section == ProbColumn) return tr("p(\u2018%1\u2019)").arg(token_);
    return {};
}

QVariant LensTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= int(rows_.size())) return {};
    const int r = index.row(), c = index.column();
    const lens::RowSummary& s = rows_[size_t(r)];
    const bool last = r == int(rows_.size()) - 1;
    if (c == RowColumn) {
        if (role == Qt::DisplayRole)
            return r == 0 ? tr("x\u2080 (embedding)") : last ? tr("h.%1 (final: the model's logits)").arg(r - 1) : tr("h.%1").arg(r - 1);
        return {};
    }
    if (c >= FirstTopColumn && c < FirstTopColumn + kTop) {
        const int k = c - FirstTopColumn;
        if (k >= int(s.top.size())) return {};
        const int32_t id = s.top[size_t(k)];
        if (role == Qt::DisplayRole)
            return QStringLiteral("%1  %2").arg(vocab_ ? vocab_->displayOf(id) : QString::number(id), formatPercent(s.prob[size_t(k)]));
        if (role == Qt::UserRole) return id;
        if (role == Qt::ToolTipRole) return tr("id %1 \u00b7 click to follow this token through the layers").arg(id);
        if (role == Qt::BackgroundRole && !track_.rank.empty() && track_.rank[size_t(r)] == k)
            return QBrush(QColor(0xff, 0xe0, 0x8a));
        return {};
    }
    if (track_.rank.empty()) return {};
    if (c == RankColumn) {
        if (role == Qt::DisplayRole || role == Qt::UserRole) return qlonglong(track_.rank[size_t(r)] + 1);
        if (role == Qt::TextAlignmentRole) return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    }
    if (c == ProbColumn) {
        if (role == Qt::DisplayRole) return formatPercent(track_.prob[size_t(r)]);
        if (role == Qt::UserRole) return track_.prob[size_t(r)];
        if (role == Qt::TextAlignmentRole) return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    }
    return {};
}

// ---------------------------------------------------------------------------------------------- view

LensView::LensView(ExplorerState* state, EngineClient* client, LogitsSource* source, QWidget* parent)
    : ViewPage(tr("Logit lens"), state, client, parent), source_(source) {
    compute_ = new QPushButton(tr("Compute at this position"));
    compute_->setToolTip(tr("Pass the residual after the embedding and after every block through the final norm and "
                            "the output projection, over the whole vocabulary (on the engine's thread)"));
    token_ = new QLineEdit;
    token_->setPlaceholderText(tr("follow a token (text or id)"));
    token_->setClearButtonEnabled(true);
    token_->setMaximumWidth(240);
    controls()->addWidget(compute_);
    controls()->addSpacing(10);
    controls()->addWidget(new QLabel(tr("follow")));
    controls()->addWidget(token_);
    controls()->addStretch(1);

    status_ = new QLabel;
    status_->setWordWrap(true);
    model_ = new LensTableModel(this);
    table_ = new QTableView;
    table_->setModel(model_);
    table_->setAlternatingRowColors(true);
    table_->verticalHeader()->hide();
    table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table_->horizontalHeader()->setStretchLastSection(true);
    plot_ = new LensPlot;
    split_ = new QSplitter(Qt::Vertical);
    split_->addWidget(table_);
    split_->addWidget(plot_);
    split_->setSizes({300, 420});
    auto* canvas = new QWidget;
    auto* cv = new QVBoxLayout(canvas);
    cv->setContentsMargins(0, 0, 0, 0);
    cv->addWidget(status_);
    cv->addWidget(split_, 1);
    setCanvas(canvas);
    setReadout(tr("Each row: the residual after that block, read out as if it were the last one."));

    connect(compute_, &QPushButton::clicked, this, &LensView::compute);
    connect(token_, &QLineEdit::returnPressed, this, [this] { follow(token_->text()); });
    connect(table_, &QTableView::clicked, this, [this](const QModelIndex& i) {
        const QVariant id = model_->data(i, Qt::UserRole);
        if (i.column() >= LensTableModel::FirstTopColumn && id.isValid()) follow(id.toInt());
    });
    connect(source_, &LogitsSource::lensChanged, this, &LensView::onLens);
    connect(source_, &LogitsSource::busyChanged, this, &LensView::updateStatus);
    connect(source_, &LogitsSource::logitsChanged, this, &LensView::updateStatus);
    connect(plot_, &LensPlot::hoverText, this, &LensView::setReadout);
    onLens();
}

void LensView::showEvent(QShowEvent* e) {
    ViewPage::showEvent(e);
    source_->setActive(this, true);
}

void LensView::hideEvent(QHideEvent* e) {
    ViewPage::hideEvent(e);
    source_->setActive(this, false);
}

bool LensView::hasContent() const { return model_->rowCount() > 0; }

void LensView::compute() { source_->requestLens(); }

void LensView::onLens() {
    const PositionLogitsPtr& r = source_->lens();
    if (!r || r->lensRows == 0) {
        if (shownId_ != -1) {
            model_->setLens({}, nullptr);
            plot_->setTrack(QString(), {}, {}, 2);
            final_.setLogits({});
            shownId_ = -1;
        }
        updateStatus();
        return;
    }
    if (r->id == shownId_) return;
    shownId_ = r->id;
    const int64_t vocab = int64_t(r->logits.size());
    model_->setLens(lens::summarize_rows(r->lens, r->lensRows, vocab, LensTableModel::kTop), r->vocab);
    final_.setLogits(std::vector<float>(r->lens.end() - vocab, r->lens.end()));
    // The table as tall as its rows (up to half the view); the plot takes the rest.
    const int total = split_->height();
    const int want = table_->horizontalHeader()->height() + table_->verticalHeader()->defaultSectionSize() * int(r->lensRows) +
                     table_->horizontalScrollBar()->sizeHint().height() + 6;
    if (total > 0) split_->setSizes({std::min(want, total / 2), total - std::min(want, total / 2)});
    const int32_t next = source_->actualNext();
    follow(next >= 0 ? next : final_.idAt(0));
    updateStatus();
}

void LensView::follow(int32_t id) {
    const PositionLogitsPtr& r = source_->lens();
    if (!r || r->lensRows == 0 || id < 0 || id >= int64_t(r->logits.size())) return;
    followed_ = id;
    const int64_t vocab = int64_t(r->logits.size());
    lens::TokenTrack track = lens::track_token(r->lens, r->lensRows, vocab, id);
    const QString name = r->vocab ? r->vocab->displayOf(id) : QString::number(id);
    plot_->setTrack(name, track.prob, track.rank, vocab);
    model_->setTrack(name, std::move(track));
    if (token_->text() != name && !token_->hasFocus()) token_->setText(name);
}

void LensView::follow(const QString& query) {
    const PositionLogitsPtr& r = source_->lens();
    if (!r || !r->vocab || final_.empty()) return;
    const std::vector<int32_t> found = final_.find(query, *r->vocab, 1);
    if (found.empty()) {
        setReadout(tr("No token matches \u201c%1\u201d").arg(query));
        return;
    }
    follow(found.front());
}

void LensView::updateStatus() {
    const RunResultPtr& run = state_->run();
    compute_->setEnabled(run && !source_->lensBusy());
    if (!run) {
        status_->setText(tr("Run a prompt, or click a token the chat generated."));
        return;
    }
    const int p = source_->position();
    QString text = tr("Position %1 \u2018%2\u2019").arg(p).arg(run->tokenTexts.value(p));
    if (source_->lensBusy()) text += tr(": computing the lens over %1 rows of the whole vocabulary\u2026").arg(state_->layers() + 1);
    else if (!source_->lens()) text += source_->error().isEmpty() ? tr(": press Compute to see what each layer would predict here") : QStringLiteral(": ") + source_->error();
    else text += tr(": the residual after each block through the final norm and the output projection; the last row is "
                    "the model's own prediction");
    status_->setText(text);
}

ViewPage::TensorExport LensView::tensorExport() const {
    TensorExport e;
    const PositionLogitsPtr& r = source_->lens();
    if (!r || r->lensRows == 0) return e;
    e.name = QStringLiteral("logit_lens_position_%1").arg(r->position);
    e.data = r->lens;
    e.shape = {r->lensRows, int64_t(r->logits.size())};
    return e;
}

}  // namespace strata::ui
