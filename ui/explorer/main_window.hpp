#pragma once
// Strata's main window: open a model (File > Open, drag and drop, recent models, the command line, or the
// demonstration model by default), run a prompt, and explore it: the atlas of the model's parts on the left,
// the views in the middle, the annotation card of what is shown on the right, the token chips above and the
// layer stepper below. The engine runs in EngineClient's worker thread; this window only reacts to its signals.
#include <QMainWindow>

#include "explorer/explorer_state.hpp"

class QCheckBox;
class QLabel;
class QLineEdit;
class QMenu;
class QProgressBar;
class QPushButton;
class QTabWidget;
class QTreeView;
class QActionGroup;
class QSplitter;

namespace strata::ui {

class AtlasModel;
class AttentionView;
class AttributionView;
class CompareView;
class InterventionBar;
class CardPanel;
class EmbeddingView;
class EngineClient;
class GainsView;
class LayerStepper;
class LogitsView;
class StorageView;
class NormsView;
class ShortcutOverlay;
class StrataView;
class TensorView;
class TokenChips;
class ViewPage;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    // A span repeated (docs/tour.md starts here): the trained demo's induction heads in layer 1 look back to what
    // followed each word the first time, and the model predicts " apple" again.
    static constexpr const char* kDefaultPrompt =
        "Tom said: seven river window happy cup apple. Tom said: seven river window happy cup";

    void openPath(const QString& path);
    void openDemo();
    // "cpu" or "vulkan"; reopens the current model. `remember`: kept for the next start (the menu does; a
    // command-line --backend does not).
    void setBackend(const QString& name, bool remember = true);
    QString backend() const { return backend_; }
    // The Vulkan device (-1: the best one); reopens the current model when it runs on Vulkan.
    void setDevice(int index, bool remember = true);
    int device() const { return device_; }
    // Restores / saves the window's geometry, state and splitter (QSettings); closing the window saves.
    void restoreLayout();
    void saveLayout() const;
    // Find token (Ctrl+F): selects the next position, after the selected one (or from the first, `fromStart`),
    // whose token text contains `text` (case-insensitive); returns it, or -1.
    int findToken(const QString& text, bool fromStart = false);
    ShortcutOverlay* shortcutOverlay() const { return overlay_; }
    QMenu* recentMenu() const { return recentMenu_; }
    QLineEdit* findField() const { return find_; }
    QSplitter* splitter() const { return split_; }
    // The Vulkan devices as last listed, and why none is usable (empty when one is).
    QStringList vulkanDevices() const { return devices_; }
    QString vulkanProblem() const { return vulkanProblem_; }
    void runPrompt(const QString& text);
    // Runs exactly `tokens` (a conversation up to a generated token, from the chat) in the explorer; `label` is
    // shown in the status bar. Returns the run's request id (RunResult::id) so the caller can select a position.
    qint64 runTokens(const QString& label, const std::vector<int32_t>& tokens, bool logitLens);
    void setLogitLens(bool on);
    // The current run's tokens again, with the ablations now in force (ExplorerState::ablationsChanged).
    void rerun();
    // "What made this token": runs `tokens` in the explorer (as runTokens) and, once in, attributes `target`'s
    // logit at `position` in the Attribution view.
    void attributeToken(const QString& label, const std::vector<int32_t>& tokens, int position, int32_t target);
    // What the toolbar's Ablate actions act on now (the attention view's head, else the atlas's block, attention
    // or feed_forward), as a spec, and its name for a person; empty when the selection cannot be ablated.
    QString ablationTarget(QString* what = nullptr) const;
    // Selects a part in the atlas: key as in Part::key, layer for parts inside blocks (-1 outside).
    void selectPart(const QString& key, int layer);
    void showView(ViewPage* view);

    ExplorerState* state() const { return state_; }
    EngineClient* client() const { return client_; }
    AtlasModel* atlas() const { return atlas_; }
    QTreeView* atlasView() const { return tree_; }
    CardPanel* cardPanel() const { return cards_; }
    TokenChips* chips() const { return chips_; }
    LayerStepper* stepper() const { return stepper_; }
    QTabWidget* tabs() const { return tabs_; }
    QList<ViewPage*> views() const;
    TensorView* tensorView() const { return tensorView_; }
    StrataView* strataView() const { return strataView_; }
    NormsView* normsView() const { return normsView_; }
    GainsView* gainsView() const { return gainsView_; }
    AttentionView* attentionView() const { return attentionView_; }
    EmbeddingView* embeddingView() const { return embeddingView_; }
    LogitsView* logitsView() const { return logitsView_; }
    StorageView* storageView() const { return storageView_; }
    CompareView* compareView() const { return compareView_; }
    AttributionView* attributionView() const { return attributionView_; }
    InterventionBar* interventionBar() const { return interventionBar_; }
    bool busy() const { return loadId_ != 0 || runId_ != 0; }
    QString lastError() const { return lastError_; }

signals:
    void devicesListed();
    void modelReady();
    void runReady();
    void lensReady();
    void failed(const QString& message);

protected:
    void dragEnterEvent(QDragEnterEvent* e) override;
    void dropEvent(QDropEvent* e) override;
    void closeEvent(QCloseEvent* e) override;
    bool eventFilter(QObject* watched, QEvent* e) override;

private:
    void buildActions();
    void buildCausal();  // the causal tools: main_window_causal.cpp
    void buildLayout();
    void connectEngine();
    void chooseFile();
    void chooseFolder();
    void startRun();
    void onModelLoaded(qint64 id, const ModelSummaryPtr& summary);
    void onRunFinished(const RunResultPtr& run);
    void onAtlasCurrentChanged(const QModelIndex& index);
    void syncAtlasToLayer();
    void updateCard();
    void updateStatus();
    void showError(const QString& what, const QString& message);
    void setLoading(bool loading);
    void addRecent(const QString& path);
    void rebuildRecentMenu();
    void rebuildDeviceMenu();
    void onDevicesListed(const QStringList& devices, int chosen, const QString& problem);
    QString backendRequest() const;  // what the worker is asked for: "cpu", "vulkan" or "vulkan:N"
    void reopen();
    void showFind();
    ViewPage* preferredView(const Part& part) const;

    ExplorerState* state_;
    EngineClient* client_;
    AtlasModel* atlas_;
    QTreeView* tree_;
    CardPanel* cards_;
    TokenChips* chips_;
    LayerStepper* stepper_;
    QTabWidget* tabs_;
    TensorView* tensorView_;
    StrataView* strataView_;
    NormsView* normsView_;
    GainsView* gainsView_;
    AttentionView* attentionView_;
    EmbeddingView* embeddingView_;
    LogitsView* logitsView_;
    StorageView* storageView_;
    CompareView* compareView_ = nullptr;
    AttributionView* attributionView_ = nullptr;
    InterventionBar* interventionBar_ = nullptr;
    QAction* ablateZero_ = nullptr;
    QAction* ablateMean_ = nullptr;
    struct PendingAttribution {
        qint64 run = 0;
        int position = 0;
        int32_t target = 0;
    } pendingAttribution_;

    QLineEdit* prompt_;
    QPushButton* run_;
    QCheckBox* lens_;
    QLabel* demoBanner_;
    QLabel* errorBanner_;
    QProgressBar* progress_;
    QLabel* progressText_;
    QPushButton* cancel_;
    QLabel* statusModel_;
    QLabel* statusFormat_;
    QLabel* statusDtype_;
    QLabel* statusBackend_;
    QLabel* statusDevice_;
    QMenu* recentMenu_;
    QMenu* deviceMenu_;
    QActionGroup* backendGroup_;
    QSplitter* split_;
    QWidget* findBar_;
    QLineEdit* find_;
    QLabel* findResult_;
    ShortcutOverlay* overlay_;
    QStringList devices_;
    QString vulkanProblem_;
    int device_ = -1;

    QString backend_ = QStringLiteral("cpu");
    QString modelPath_;   // what is open (empty: the demonstration model)
    bool openedDemo_ = false;
    QString pendingPath_;  // what is being opened
    bool pendingDemo_ = false;
    qint64 loadId_ = 0;
    qint64 runId_ = 0;
    bool syncing_ = false;
    QString lastError_;
};

}  // namespace strata::ui
