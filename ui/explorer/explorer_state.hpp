#pragma once
// What the explorer is looking at: the model, the last run (its kept trace), the logit lens, and the selection
// (layer, position, part of the model). Views read it and redraw on its signals; stepping through layers only
// changes the selection, never recomputes.
#include <map>
#include <string>

#include <QObject>
#include <QString>

#include "worker/worker_types.hpp"

namespace strata::ui {

// A part of the model as the atlas names it. Names may hold {N}, replaced by the selected layer.
struct Part {
    QString key;         // stable path: "tok_embeddings", "block", "block/attention/wq", "norm", "output"
    QString label;       // "wq"
    QString tensor;      // the traced activation it produces ("layers.{N}.q"); empty when none is traced
    QString weight;      // its weight ("layers.{N}.attention.wq"); empty for ops
    QString tensorCard;  // card ids (resources/cards/<id>.json)
    QString weightCard;
    bool perLayer = false;
    bool operator==(const Part& o) const { return key == o.key; }
};

class ExplorerState : public QObject {
    Q_OBJECT
public:
    explicit ExplorerState(QObject* parent = nullptr);

    const ModelSummaryPtr& model() const { return model_; }
    const RunResultPtr& run() const { return run_; }
    const LensResultPtr& lens() const { return lens_; }
    int layer() const { return layer_; }
    int position() const { return position_; }
    const Part& part() const { return part_; }
    int layers() const;     // n_layers, 0 without a model
    int positions() const;  // T of the last run, 0 without one

    // `pattern` with {N} replaced by the selected layer.
    QString resolve(const QString& pattern) const;
    // A tensor of the last run's trace, or nullptr. In diff mode (with ablations in force), the intervened
    // tensor minus the clean run's, element by element (made on first use and kept for this run).
    const TracedTensor* traced(const QString& name) const;

    // Ablations in force: every run repeats with them (the main window reruns on ablationsChanged).
    const AblationList& ablations() const { return ablations_; }
    void setAblations(const AblationList& ablations);
    void addAblation(const AblationSpec& ablation);  // replaces the same spec in the other mode
    void removeAblation(const QString& spec);
    void clearAblations() { setAblations({}); }
    bool isAblated(const QString& spec) const;
    // Diff mode: traced() returns intervened - clean. Only meaningful while the run has a clean run.
    bool diff() const { return diff_; }
    bool showingDiff() const { return diff_ && run_ && run_->clean; }
    void setDiff(bool on);

    void setModel(const ModelSummaryPtr& model);
    void setRun(const RunResultPtr& run);
    void setLens(const LensResultPtr& lens);
    void setLayer(int layer);
    void setPosition(int position);
    void setPart(const Part& part);

signals:
    void modelChanged();
    void runChanged();
    void lensChanged();
    void layerChanged(int layer);
    void positionChanged(int position);
    void partChanged();
    void ablationsChanged();
    void diffChanged(bool on);

private:
    ModelSummaryPtr model_;
    RunResultPtr run_;
    LensResultPtr lens_;
    int layer_ = 0;
    int position_ = 0;
    Part part_;
    AblationList ablations_;
    bool diff_ = false;
    mutable std::map<std::string, TracedTensor> diffs_;  // name -> intervened - clean, for run_
};

}  // namespace strata::ui
