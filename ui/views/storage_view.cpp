#include "views/storage_view.hpp"

#include <cmath>

#include <QComboBox>
#include <QCoreApplication>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenu>
#include <QPointer>
#include <QPushButton>
#include <QThreadPool>
#include <QVBoxLayout>

#include "strata/error.hpp"
#include "strata/model.hpp"
#include "strata/quant.hpp"
#include "views/heatmap_widget.hpp"
#include "views/plot_util.hpp"

namespace strata::ui {

namespace {

constexpr int kGridRows = 512;
constexpr int kGridCols = 1024;
constexpr DType kCompareTypes[] = {DType::Q8_0, DType::Q6_K, DType::Q5_K, DType::Q4_K, DType::Q4_0};

QString typeName(DType t) { return QString::fromLatin1(dtype_name(t).data(), int(dtype_name(t).size())); }

// The tensor `name` of a model; "output" of a model with tied embeddings is tok_embeddings.
const TensorView& weightOf(const Model& m, const std::string& name) {
    return name == "output" ? m.output_weight() : m.tensor(name);
}

}  // namespace

StorageView::StorageView(ExplorerState* state, EngineClient* client, QWidget* parent)
    : ViewPage(tr("Weight storage and quantization error"), state, client, parent) {
    setTabName(tr("Storage"));
    name_ = new QLabel;
    name_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    as_ = new QComboBox;
    for (DType t : kCompareTypes)
        as_->addItem(tr("if stored as %1 (%2 bits/weight)").arg(typeName(t)).arg(quant::bits_per_weight(t)),
                     int(t));
    as_->setCurrentIndex(3);  // Q4_K: what most people run
    as_->setToolTip(tr("Quantize this float weight to the block type and dequantize it again: the map shows what "
                       "would be lost (nothing is written)"));
    originalButton_ = new QPushButton(tr("Original\u2026"));
    originalButton_->setToolTip(tr("Open the float checkpoint a quantized model came from, to see each weight's error"));
    controls()->addWidget(name_, 1);
    controls()->addWidget(as_);
    controls()->addWidget(originalButton_);

    auto* body = new QWidget;
    auto* layout = new QVBoxLayout(body);
    layout->setContentsMargins(0, 0, 0, 0);
    info_ = new QLabel;
    info_->setTextFormat(Qt::RichText);
    info_->setWordWrap(true);
    info_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    status_ = new QLabel;
    status_->setWordWrap(true);
    heatmap_ = new HeatmapWidget;
    heatmap_->setScaleKind(ColorScale::Kind::Diverging);
    heatmap_->setAxisNames(tr("output row"), tr("input feature"));
    layout->addWidget(info_);
    layout->addWidget(status_);
    layout->addWidget(heatmap_, 1);
    setCanvas(body);
    setReadout(tr("Each pixel is the largest error (dequantized minus original) of the weights it covers; hover to "
                  "read one."));

    connect(heatmap_, &HeatmapWidget::hoverChanged, this, [this](const QString& s) {
        if (!s.isEmpty()) setReadout(s);
    });
    connect(as_, &QComboBox::currentIndexChanged, this, [this] { refresh(); });
    connect(originalButton_, &QPushButton::clicked, this, &StorageView::chooseOriginal);
    connect(state_, &ExplorerState::modelChanged, this, [this] {
        model_.reset();
        refresh();
    });
    connect(state_, &ExplorerState::partChanged, this, &StorageView::refresh);
    connect(state_, &ExplorerState::layerChanged, this, &StorageView::refresh);
    refresh();
}

StorageView::~StorageView() {
    if (cancel_) *cancel_ = true;
}

QString StorageView::cardId() const {
    const Part& p = state_->part();
    return p.weightCard.isEmpty() ? p.tensorCard : p.weightCard;
}

bool StorageView::hasContent() const { return result_ != nullptr && heatmap_->rows() > 0; }

QString StorageView::storageText() const { return info_->text(); }

QString StorageView::status() const { return status_->text(); }

ViewPage::TensorExport StorageView::tensorExport() const {
    if (!result_) return {};
    TensorExport e;
    e.name = QString::fromStdString(result_->name) + QStringLiteral(".quant_error_grid");
    e.data = result_->cells;
    e.shape = {result_->grid_rows, result_->grid_cols};
    return e;
}

void StorageView::setOriginalPath(const QString& path) {
    originalPath_ = path;
    original_.reset();
    originalButton_->setToolTip(path.isEmpty() ? tr("Open the float checkpoint a quantized model came from")
                                         : tr("Original: %1").arg(path));
    refresh();
}

void StorageView::setCompareType(DType t) {
    const int i = as_->findData(int(t));
    if (i >= 0) as_->setCurrentIndex(i);
}

void StorageView::chooseOriginal() {
    QMenu menu;
    QAction* folder = menu.addAction(tr("A Hugging Face or Meta folder\u2026"));
    QAction* gguf = menu.addAction(tr("A .gguf file\u2026"));
    QAction* none = menu.addAction(tr("None"));
    none->setEnabled(!originalPath_.isEmpty());
    QAction* chosen = menu.exec(originalButton_->mapToGlobal(QPoint(0, originalButton_->height())));
    if (chosen == folder) {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("The original checkpoint"));
        if (!dir.isEmpty()) setOriginalPath(dir);
    } else if (chosen == gguf) {
        const QString file = QFileDialog::getOpenFileName(this, tr("The original checkpoint"), {},
                                                          tr("GGUF (*.gguf)"));
        if (!file.isEmpty()) setOriginalPath(file);
    } else if (chosen == none) {
        setOriginalPath({});
    }
}

void StorageView::refresh() {
    const ModelSummaryPtr& m = state_->model();
    const Part& part = state_->part();
    weight_ = part.weight.isEmpty() ? QString() : state_->resolve(part.weight);
    result_.reset();
    if (cancel_) *cancel_ = true;
    ++generation_;
    if (!m) {
        name_->clear();
        info_->clear();
        status_->clear();
        heatmap_->clear(tr("Open a model (File \u25b8 Open) or wait for the demonstration model."));
        return;
    }
    if (weight_.isEmpty()) {
        name_->clear();
        info_->clear();
        status_->clear();
        heatmap_->clear(tr("Select a weight in the atlas (tok_embeddings, wq, w1, norm, output\u2026) to see how it "
                           "is stored."));
        return;
    }
    // The summary knows every weight's type and shape; "output" of a tied model is the embedding table.
    QString key = weight_;
    auto it = m->weights.find(key.toStdString());
    if (it == m->weights.end() && key == QLatin1String("output")) it = m->weights.find("tok_embeddings");
    if (it == m->weights.end()) {
        heatmap_->clear(tr("%1 is not in this model.").arg(weight_));
        return;
    }
    const WeightInfo& w = it->second;
    const DType type = [&] {
        for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K,
                        DType::Q6_K})
            if (typeName(t) == w.dtype) return t;
        return DType::F32;
    }();
    const bool quantized = dtype_is_block(type);
    const uint64_t n = w.numel();
    const uint64_t bytes = dtype_bytes(type, int64_t(n));
    QStringList shape;
    for (int64_t d : w.shape) shape << groupDigits(uint64_t(d));
    name_->setText(QStringLiteral("<code>%1</code> &nbsp;[%2]").arg(weight_, shape.join(QStringLiteral(", "))));
    QString html = QStringLiteral("<table cellspacing=0 cellpadding=1>");
    auto row = [&](const QString& k, const QString& v) {
        html += QStringLiteral("<tr><td><b>%1</b>&nbsp;&nbsp;</td><td>%2</td></tr>").arg(k, v);
    };
    row(tr("stored as"), quantized ? tr("%1 (ggml block type)").arg(w.dtype) : tr("%1 (one value per weight)").arg(w.dtype));
    row(tr("bits per weight"), QString::number(quant::bits_per_weight(type)));
    if (quantized)
        row(tr("block"), tr("%1 weights in %2 bytes").arg(dtype_block_size(type)).arg(dtype_block_bytes(type)));
    row(tr("size"), tr("%1 weights, %2").arg(groupDigits(n), formatBytes(bytes)));
    storageRows_ = html;
    info_->setText(html + QStringLiteral("</table>"));

    as_->setEnabled(!quantized);
    if (quantized && originalPath_.isEmpty()) {
        status_->setText(tr("The original float weights are not at hand: open the checkpoint this model was "
                            "quantized from (Original\u2026) to see the error of every weight."));
        heatmap_->clear(tr("No original to compare with."));
        return;
    }
    start();
}

void StorageView::start() {
    const ModelSummaryPtr& m = state_->model();
    const int generation = generation_;
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    cancel_ = cancel;
    const bool useOriginal = !originalPath_.isEmpty();
    const DType as = DType(as_->currentData().toInt());
    status_->setText(useOriginal ? tr("Comparing %1 with the original in %2\u2026").arg(weight_, originalPath_)
                                 : tr("Quantizing %1 to %2 and back\u2026").arg(weight_, typeName(as)));
    heatmap_->clear(tr("Computing\u2026"));
    QPointer<StorageView> self(this);
    const std::string name = weight_.toStdString();
    const std::string path = m->path.toStdString(), originalPath = originalPath_.toStdString();
    std::shared_ptr<const Model> model = model_, original = original_;
    QThreadPool::globalInstance()->start([=]() mutable {
        std::shared_ptr<const QuantError> result;
        QString error;
        try {
            if (!model) model = load_model(path);
            if (useOriginal && !original) original = load_model(originalPath);
            const TensorView& w = weightOf(*model, name);
            const TensorView* o = nullptr;
            if (useOriginal) {
                if (name != "output" && !original->has(name))
                    throw InputError(name + " is not in the original checkpoint " + originalPath);
                o = &weightOf(*original, name);
            }
            result = std::make_shared<QuantError>(quantization_error(w, o, as, kGridRows, kGridCols, cancel.get()));
        } catch (const Cancelled&) {
            return;
        } catch (const std::exception& e) {
            error = QString::fromUtf8(e.what());
        }
        QMetaObject::invokeMethod(
            QCoreApplication::instance(), [self, generation, result, model, original, error] {
                if (self) self->onResult(generation, result, model, original, error);
            },
            Qt::QueuedConnection);
    });
}

void StorageView::onResult(int generation, std::shared_ptr<const QuantError> r, std::shared_ptr<const Model> model,
                           std::shared_ptr<const Model> original, QString error) {
    if (model && !model_) model_ = model;
    if (original && !original_ && !originalPath_.isEmpty()) original_ = original;
    if (generation != generation_) return;
    if (!error.isEmpty()) {
        status_->setText(tr("Cannot compare: %1").arg(error));
        heatmap_->clear(error);
        emit resultReady();
        return;
    }
    result_ = r;
    const QString what = originalPath_.isEmpty()
                             ? tr("%1 (%2) quantized to %3 and back").arg(weight_, typeName(r->original_type), typeName(r->approx_type))
                             : tr("%1 as stored (%2) against the original (%3)").arg(weight_, typeName(r->approx_type), typeName(r->original_type));
    const double snr = r->snr_db();
    auto row = [](const QString& k, const QString& v) {
        return QStringLiteral("<tr><td><b>%1</b>&nbsp;&nbsp;</td><td>%2</td></tr>").arg(k, v);
    };
    info_->setText(storageRows_ + row(tr("relative L2 error"), formatValue(r->rel_l2)) +
                   row(tr("RMS error"), tr("%1 against an RMS weight of %2 (SNR %3 dB)")
                                            .arg(formatValue(r->rms_error), formatValue(r->rms_original),
                                                 std::isinf(snr) ? QStringLiteral("\u221e") : QString::number(snr, 'f', 1))) +
                   row(tr("largest |error|"), tr("%1 at [%2, %3]").arg(formatValue(r->max_abs)).arg(r->max_row).arg(r->max_col)) +
                   QStringLiteral("</table>"));
    status_->setText(what);
    heatmap_->setMatrix(r->cells, r->grid_rows, r->grid_cols, r->row_step, r->col_step);
    emit resultReady();
}

}  // namespace strata::ui
