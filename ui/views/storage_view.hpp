#pragma once
// How the selected weight is stored, and what quantization does to it. The header says the stored type, bits per
// weight, block size and bytes; the map shows the quantization error (approximation minus original) over the
// whole matrix, reduced so that each pixel keeps its bucket's largest error:
//   - a float weight: quantized now to the chosen block type and dequantized again (nothing is written);
//   - a quantized weight: against the same weight of its float original, once the person opens that checkpoint.
// The work runs on the thread pool over the checkpoint's mapped file (never on the GUI thread or the engine
// worker); a newer request cancels the one before.
#include <atomic>
#include <memory>

#include "strata/dtype.hpp"
#include "views/view_page.hpp"
#include "worker/quant_error.hpp"

class QComboBox;
class QLabel;
class QPushButton;

namespace strata {
class Model;
}

namespace strata::ui {

class HeatmapWidget;

class StorageView : public ViewPage {
    Q_OBJECT
public:
    StorageView(ExplorerState* state, EngineClient* client, QWidget* parent = nullptr);
    ~StorageView() override;

    QString cardId() const override;
    TensorExport tensorExport() const override;
    bool hasContent() const override;

    // The float checkpoint a quantized model came from (a Hugging Face or Meta folder, or a .gguf); empty: none.
    void setOriginalPath(const QString& path);
    QString originalPath() const { return originalPath_; }
    // For a float weight: the block type it is quantized to for the comparison (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K).
    void setCompareType(DType t);
    // The weight shown, the header text, and the last result (tests).
    QString weightName() const { return weight_; }
    QString storageText() const;
    const QuantError* result() const { return result_.get(); }
    QString status() const;
    HeatmapWidget* heatmap() const { return heatmap_; }

signals:
    void resultReady();

private:
    void refresh();
    void start();
    void onResult(int generation, std::shared_ptr<const QuantError> r, std::shared_ptr<const Model> model,
                  std::shared_ptr<const Model> original, QString error);
    void chooseOriginal();

    QLabel* name_;
    QComboBox* as_;
    QPushButton* originalButton_;
    QLabel* info_;
    QLabel* status_;
    HeatmapWidget* heatmap_;
    QString weight_;
    QString storageRows_;  // the header table's rows about storage (the error rows follow them)
    QString originalPath_;
    std::shared_ptr<const Model> model_;     // the open checkpoint, mapped again for reading here
    std::shared_ptr<const Model> original_;  // the original checkpoint
    std::shared_ptr<const QuantError> result_;
    std::shared_ptr<std::atomic<bool>> cancel_;
    int generation_ = 0;
};

}  // namespace strata::ui
