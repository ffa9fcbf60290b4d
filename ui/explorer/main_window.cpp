#include "explorer/main_window.hpp"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCheckBox>
#include <QCloseEvent>
#include <QDir>
#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QToolButton>
#include <QTreeView>
#include <QVBoxLayout>

#include "cards/card_panel.hpp"
#include "chat/chat_install.hpp"
#include "explorer/atlas_model.hpp"
#include "explorer/engine_client.hpp"
#include "explorer/intervention_bar.hpp"
#include "explorer/layer_stepper.hpp"
#include "explorer/shortcut_overlay.hpp"
#include "explorer/token_chips.hpp"
#include "explorer/window_settings.hpp"
#include "views/attention_view.hpp"
#include "views/embedding_view.hpp"
#include "views/gains_view.hpp"
#include "views/logits_view.hpp"
#include "views/norms_view.hpp"
#include "views/plot_util.hpp"
#include "views/strata_view.hpp"
#include "views/tensor_view.hpp"
#include "views/storage_view.hpp"

namespace strata::ui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setWindowTitle(tr("Strata"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/strata.svg")));
    setAcceptDrops(true);
    state_ = new ExplorerState(this);
    client_ = new EngineClient(this);
    atlas_ = new AtlasModel(this);
    backend_ = loadBackend();
    device_ = loadDevice();
    buildLayout();
    buildActions();
    connectEngine();
    updateStatus();
    resize(1600, 1000);
    installChat(this);  // the Chat tab beside the explorer, and the logits explorer views (ui/chat, ui/logits)
    buildCausal();      // ablation, the compare view and attribution
    // After the chat's menu, so the overlay and the Help menu list everything.
    QMenu* help = menuBar()->addMenu(tr("&Help"));
    overlay_ = new ShortcutOverlay(this, menuBar());
    QAction* keys = help->addAction(tr("&Keyboard Shortcuts"), overlay_, &ShortcutOverlay::toggle);
    keys->setShortcuts({QKeySequence(Qt::Key_F1), QKeySequence(Qt::Key_Question)});
    keys->setObjectName(QStringLiteral("actionShortcuts"));
    restoreLayout();
    client_->listDevices();
}

void MainWindow::restoreLayout() {
    const WindowLayout l = loadWindowLayout();
    if (!l.geometry.isEmpty()) restoreGeometry(l.geometry);
    if (!l.state.isEmpty()) restoreState(l.state);
    if (!l.splitter.isEmpty()) split_->restoreState(l.splitter);
}

void MainWindow::saveLayout() const { saveWindowLayout({saveGeometry(), saveState(), split_->saveState()}); }

void MainWindow::closeEvent(QCloseEvent* e) {
    saveLayout();
    QMainWindow::closeEvent(e);
}

MainWindow::~MainWindow() = default;

QList<ViewPage*> MainWindow::views() const {
    QList<ViewPage*> out;
    for (int i = 0; i < tabs_->count(); ++i) out << static_cast<ViewPage*>(tabs_->widget(i));
    return out;
}

void MainWindow::buildLayout() {
    // Prompt row.
    prompt_ = new QLineEdit(QString::fromUtf8(kDefaultPrompt));
    prompt_->setPlaceholderText(tr("Type a prompt and press Enter"));
    prompt_->setClearButtonEnabled(true);
    run_ = new QPushButton(tr("Run"));
    run_->setDefault(true);
    run_->setToolTip(tr("Prefill <|begin_of_text|> + the prompt, keeping every intermediate tensor (Ctrl+R)"));
    lens_ = new QCheckBox(tr("logit lens"));
    lens_->setChecked(true);
    lens_->setToolTip(tr("After the run, pass every layer's residual through the final norm and output (the strata view's top tokens)"));
    auto* promptRow = new QHBoxLayout;
    promptRow->addWidget(new QLabel(tr("Prompt")));
    promptRow->addWidget(prompt_, 1);
    promptRow->addWidget(lens_);
    promptRow->addWidget(run_);

    demoBanner_ = new QLabel;
    demoBanner_->setStyleSheet(QStringLiteral("QLabel { background: #fff3cd; color: #664d03; border: 1px solid #ffe69c; padding: 4px 8px; }"));
    demoBanner_->setVisible(false);
    errorBanner_ = new QLabel;
    errorBanner_->setWordWrap(true);
    errorBanner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    errorBanner_->setStyleSheet(QStringLiteral("QLabel { background: #f8d7da; color: #58151c; border: 1px solid #f1aeb5; padding: 4px 8px; }"));
    errorBanner_->setVisible(false);

    chips_ = new TokenChips;

    // Atlas.
    tree_ = new QTreeView;
    tree_->setModel(atlas_);
    tree_->setUniformRowHeights(true);
    tree_->setAlternatingRowColors(true);
    tree_->header()->setSectionResizeMode(AtlasModel::NameColumn, QHeaderView::ResizeToContents);
    tree_->header()->setStretchLastSection(false);
    tree_->header()->setSectionResizeMode(AtlasModel::ShapeColumn, QHeaderView::Stretch);
    tree_->header()->setSectionResizeMode(AtlasModel::ParamsColumn, QHeaderView::ResizeToContents);

    // Views.
    tensorView_ = new TensorView(state_, client_);
    strataView_ = new StrataView(state_, client_);
    normsView_ = new NormsView(state_, client_);
    gainsView_ = new GainsView(state_, client_);
    attentionView_ = new AttentionView(state_, client_);
    embeddingView_ = new EmbeddingView(state_, client_);
    logitsView_ = new LogitsView(state_, client_);
    storageView_ = new StorageView(state_, client_);
    tabs_ = new QTabWidget;
    tabs_->setDocumentMode(true);
    for (ViewPage* v : {static_cast<ViewPage*>(tensorView_), static_cast<ViewPage*>(strataView_), static_cast<ViewPage*>(normsView_),
                        static_cast<ViewPage*>(gainsView_), static_cast<ViewPage*>(storageView_), static_cast<ViewPage*>(attentionView_),
                        static_cast<ViewPage*>(embeddingView_), static_cast<ViewPage*>(logitsView_)}) {
        tabs_->addTab(v, v->tabName());
        connect(v, &ViewPage::cardChanged, this, &MainWindow::updateCard);
        connect(v, &ViewPage::message, this, [this](const QString& m) { statusBar()->showMessage(m, 8000); });
    }

    cards_ = new CardPanel;
    stepper_ = new LayerStepper;

    auto* split = split_ = new QSplitter(Qt::Horizontal);
    split->setObjectName(QStringLiteral("explorerSplitter"));
    split->addWidget(tree_);
    split->addWidget(tabs_);
    split->addWidget(cards_);
    split->setStretchFactor(0, 0);
    split->setStretchFactor(1, 1);
    split->setStretchFactor(2, 0);
    split->setSizes({430, 750, 420});

    // Find token (Ctrl+F): a row under the chips while it is open.
    findBar_ = new QWidget;
    auto* findRow = new QHBoxLayout(findBar_);
    findRow->setContentsMargins(0, 0, 0, 0);
    find_ = new QLineEdit;
    find_->setObjectName(QStringLiteral("findToken"));
    find_->setPlaceholderText(tr("Find a token: type part of its text, Enter for the next match"));
    find_->setClearButtonEnabled(true);
    find_->installEventFilter(this);
    findResult_ = new QLabel;
    auto* findClose = new QToolButton;
    findClose->setText(tr("Close"));
    findRow->addWidget(new QLabel(tr("Find token")));
    findRow->addWidget(find_, 1);
    findRow->addWidget(findResult_);
    findRow->addWidget(findClose);
    findBar_->hide();
    connect(find_, &QLineEdit::textEdited, this, [this](const QString& t) {
        findToken(t, true);  // typing searches from the start; Enter moves on from the match
    });
    connect(find_, &QLineEdit::returnPressed, this, [this] { findToken(find_->text()); });
    connect(findClose, &QToolButton::clicked, findBar_, &QWidget::hide);

    auto* central = new QWidget;
    auto* v = new QVBoxLayout(central);
    v->setContentsMargins(6, 6, 6, 2);
    v->setSpacing(4);
    v->addWidget(demoBanner_);
    v->addWidget(errorBanner_);
    v->addLayout(promptRow);
    interventionBar_ = new InterventionBar(state_);
    v->addWidget(interventionBar_);
    v->addWidget(chips_);
    v->addWidget(findBar_);
    v->addWidget(split, 1);
    v->addWidget(stepper_);
    setCentralWidget(central);

    // Status bar: load progress (while loading) and the model, format, dtype, backend, device.
    progressText_ = new QLabel;
    progress_ = new QProgressBar;
    progress_->setMaximumWidth(260);
    cancel_ = new QPushButton(tr("Cancel"));
    statusBar()->addWidget(progressText_);
    statusBar()->addWidget(progress_);
    statusBar()->addWidget(cancel_);
    statusModel_ = new QLabel;
    statusFormat_ = new QLabel;
    statusDtype_ = new QLabel;
    statusBackend_ = new QLabel;
    statusDevice_ = new QLabel;
    for (QLabel* l : {statusModel_, statusFormat_, statusDtype_, statusBackend_, statusDevice_}) statusBar()->addPermanentWidget(l);
    setLoading(false);

    connect(run_, &QPushButton::clicked, this, &MainWindow::startRun);
    connect(prompt_, &QLineEdit::returnPressed, this, &MainWindow::startRun);
    connect(cancel_, &QPushButton::clicked, this, [this] {
        client_->cancelAll();
        progressText_->setText(tr("Cancelling\u2026"));
    });
    connect(chips_, &TokenChips::chipClicked, state_, &ExplorerState::setPosition);
    connect(stepper_, &LayerStepper::layerRequested, state_, &ExplorerState::setLayer);
    connect(tree_->selectionModel(), &QItemSelectionModel::currentChanged, this, &MainWindow::onAtlasCurrentChanged);
    connect(tabs_, &QTabWidget::currentChanged, this, &MainWindow::updateCard);
    connect(strataView_, &StrataView::partRequested, this, &MainWindow::selectPart);
    connect(strataView_, &StrataView::openTensorRequested, this, [this] { showView(tensorView_); });
    connect(normsView_, &NormsView::partRequested, this, &MainWindow::selectPart);
    connect(gainsView_, &GainsView::partRequested, this, &MainWindow::selectPart);

    connect(state_, &ExplorerState::layerChanged, this, [this](int layer) {
        stepper_->setLayer(layer);
        syncAtlasToLayer();
        updateCard();
    });
    connect(state_, &ExplorerState::positionChanged, chips_, &TokenChips::setSelected);
    connect(state_, &ExplorerState::partChanged, this, &MainWindow::updateCard);
    connect(state_, &ExplorerState::runChanged, this, &MainWindow::updateCard);
}

void MainWindow::buildActions() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open Model Folder\u2026"), QKeySequence::Open, this, &MainWindow::chooseFolder)
        ->setObjectName(QStringLiteral("actionOpen"));
    file->addAction(tr("Open &GGUF File\u2026"), QKeySequence(tr("Ctrl+Shift+O")), this, &MainWindow::chooseFile);
    file->addAction(tr("Open the &Demonstration Model"), this, &MainWindow::openDemo);
    recentMenu_ = file->addMenu(tr("Open &Recent"));
    recentMenu_->setObjectName(QStringLiteral("recentMenu"));
    recentMenu_->setProperty("shortcutRange", tr("Open a Recent Model"));
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, qApp, &QApplication::quit);
    rebuildRecentMenu();

    QMenu* model = menuBar()->addMenu(tr("&Model"));
    QAction* runAction = model->addAction(tr("&Run Prompt"), this, &MainWindow::startRun);
    runAction->setShortcuts({QKeySequence(tr("Ctrl+R")), QKeySequence(Qt::Key_F5)});
    runAction->setObjectName(QStringLiteral("actionRun"));
    model->addAction(tr("&Cancel"), QKeySequence(Qt::Key_Escape), this, [this] { client_->cancelAll(); });
    QMenu* backend = model->addMenu(tr("&Backend"));
    backendGroup_ = new QActionGroup(this);
    for (const QString& name : {QStringLiteral("cpu"), QStringLiteral("vulkan")}) {
        QAction* a = backend->addAction(name == QLatin1String("cpu") ? tr("CPU (reference)") : tr("Vulkan (GPU)"));
        a->setCheckable(true);
        a->setChecked(name == backend_);
        a->setData(name);
        backendGroup_->addAction(a);
    }
    connect(backendGroup_, &QActionGroup::triggered, this, [this](QAction* a) { setBackend(a->data().toString()); });
    deviceMenu_ = model->addMenu(tr("Vulkan &Device"));
    deviceMenu_->setObjectName(QStringLiteral("deviceMenu"));
    rebuildDeviceMenu();

    QMenu* nav = menuBar()->addMenu(tr("&Navigate"));
    QAction* prev = nav->addAction(tr("Previous Layer"), stepper_, &LayerStepper::previous);
    prev->setShortcuts({QKeySequence(Qt::Key_BracketLeft), QKeySequence(Qt::Key_PageUp)});
    prev->setObjectName(QStringLiteral("actionPreviousLayer"));
    QAction* next = nav->addAction(tr("Next Layer"), stepper_, &LayerStepper::next);
    next->setShortcuts({QKeySequence(Qt::Key_BracketRight), QKeySequence(Qt::Key_PageDown)});
    next->setObjectName(QStringLiteral("actionNextLayer"));
    QAction* play = nav->addAction(tr("Play / Pause Layers"), stepper_, &LayerStepper::togglePlay);
    play->setShortcut(QKeySequence(Qt::Key_P));
    play->setObjectName(QStringLiteral("actionPlay"));
    QAction* findAction = nav->addAction(tr("&Find Token\u2026"), this, &MainWindow::showFind);
    findAction->setShortcut(QKeySequence::Find);
    findAction->setObjectName(QStringLiteral("actionFindToken"));
    QAction* findNext = nav->addAction(tr("Find &Next Token"), this, [this] {
        if (find_->text().isEmpty()) showFind();
        else findToken(find_->text());
    });
    findNext->setShortcut(QKeySequence::FindNext);
    QAction* left = nav->addAction(tr("Previous Position"), this, [this] { state_->setPosition(state_->position() - 1); });
    left->setShortcut(QKeySequence(Qt::ALT | Qt::Key_Left));
    QAction* right = nav->addAction(tr("Next Position"), this, [this] { state_->setPosition(state_->position() + 1); });
    right->setShortcut(QKeySequence(Qt::ALT | Qt::Key_Right));
    nav->addSeparator();
    for (int i = 0; i < tabs_->count(); ++i) {
        QAction* a = nav->addAction(tabs_->tabText(i), this, [this, i] { tabs_->setCurrentIndex(i); });
        a->setShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)));
    }
}

void MainWindow::connectEngine() {
    connect(client_, &EngineClient::loadProgress, this, [this](qint64 id, const LoadStatus& s) {
        if (id != loadId_) return;
        QString text = s.phase;
        if (s.bytesTotal > 0) text += tr(": %1 of %2").arg(formatBytes(s.bytesDone), formatBytes(s.bytesTotal));
        if (s.tensorsTotal > 0) text += tr(", %1 of %2 tensors").arg(s.tensorsDone).arg(s.tensorsTotal);
        progressText_->setText(text);
        if (s.bytesTotal > 0) {
            progress_->setRange(0, 1000);
            progress_->setValue(int(1000.0 * double(s.bytesDone) / double(s.bytesTotal)));
        } else if (s.tensorsTotal > 0) {
            progress_->setRange(0, int(s.tensorsTotal));
            progress_->setValue(int(s.tensorsDone));
        } else {
            progress_->setRange(0, 0);  // busy
        }
    });
    connect(client_, &EngineClient::modelLoaded, this, &MainWindow::onModelLoaded);
    connect(client_, &EngineClient::devicesListed, this, &MainWindow::onDevicesListed);
    connect(client_, &EngineClient::runFinished, this, &MainWindow::onRunFinished);
    connect(client_, &EngineClient::lensFinished, this, [this](const LensResultPtr& lens) {
        state_->setLens(lens);
        emit lensReady();
    });
    connect(client_, &EngineClient::weightExported, this, [this](qint64, const QString& file) { statusBar()->showMessage(tr("Wrote %1").arg(file), 8000); });
    connect(client_, &EngineClient::cancelled, this, [this](qint64 id, const QString& what) {
        if (id == loadId_) {
            loadId_ = 0;
            setLoading(false);
        }
        if (id == runId_) runId_ = 0;
        run_->setEnabled(true);
        statusBar()->showMessage(tr("Cancelled: %1").arg(what), 8000);
    });
    connect(client_, &EngineClient::failed, this, [this](qint64 id, const QString& what, const QString& message) {
        if (id == loadId_) {
            loadId_ = 0;
            setLoading(false);
        }
        if (id == runId_) runId_ = 0;
        run_->setEnabled(state_->model() != nullptr);
        showError(what, message);
    });
}

void MainWindow::setLoading(bool loading) {
    progressText_->setVisible(loading);
    progress_->setVisible(loading);
    cancel_->setVisible(loading);
    if (loading) {
        progress_->setRange(0, 0);
        progressText_->setText(tr("Opening\u2026"));
    }
}

void MainWindow::openPath(const QString& path) {
    errorBanner_->hide();
    pendingPath_ = path;
    pendingDemo_ = false;
    loadId_ = client_->openModel(path, backendRequest());
    setLoading(true);
}

void MainWindow::openDemo() {
    errorBanner_->hide();
    pendingPath_.clear();
    pendingDemo_ = true;
    loadId_ = client_->openDemo(backendRequest());
    setLoading(true);
}

QString MainWindow::backendRequest() const {
    if (backend_ == QLatin1String("vulkan") && device_ >= 0) return QStringLiteral("vulkan:%1").arg(device_);
    return backend_;
}

void MainWindow::setDevice(int index, bool remember) {
    device_ = index < 0 ? -1 : index;
    if (remember) saveDevice(device_);
    rebuildDeviceMenu();
    if (backend_ == QLatin1String("vulkan")) reopen();
}

void MainWindow::setBackend(const QString& name, bool remember) {
    backend_ = name;
    if (remember) saveBackend(name);
    for (QAction* a : backendGroup_->actions()) a->setChecked(a->data().toString() == name);
    reopen();
}

void MainWindow::reopen() {
    if (!state_->model()) {
        // Nothing open yet: restart a load in flight on the new backend.
        if (loadId_ == 0) return;
        if (pendingDemo_) openDemo();
        else openPath(pendingPath_);
        return;
    }
    if (openedDemo_) openDemo();
    else openPath(modelPath_);
}

void MainWindow::chooseFolder() {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open a model folder (Hugging Face or Meta)"));
    if (!dir.isEmpty()) openPath(dir);
}

void MainWindow::chooseFile() {
    const QString file = QFileDialog::getOpenFileName(this, tr("Open a GGUF file"), QString(), tr("GGUF models (*.gguf)"));
    if (!file.isEmpty()) openPath(file);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
    if (e->mimeData()->hasUrls() && e->mimeData()->urls().value(0).isLocalFile()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
    const QString path = e->mimeData()->urls().value(0).toLocalFile();
    if (!path.isEmpty()) openPath(path);
}

void MainWindow::addRecent(const QString& path) {
    addRecentModel(path);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
    recentMenu_->clear();
    const QStringList recent = loadRecentModels();
    for (int i = 0; i < recent.size(); ++i) {
        const QString& path = recent[i];
        const QFileInfo info(path);
        // "&1  Meta-Llama-3-8B-Instruct   /home/me/models": the name to recognise, the folder to tell apart.
        const QString text = tr("&%1  %2    %3").arg(i + 1).arg(info.fileName(), QDir::toNativeSeparators(info.path()));
        QAction* a = recentMenu_->addAction(text, this, [this, path] { openPath(path); });
        a->setData(path);
        a->setToolTip(path);
        if (i < 9) a->setShortcut(QKeySequence(Qt::CTRL | Qt::ALT | Qt::Key(Qt::Key_1 + i)));
        if (!info.exists()) {
            a->setEnabled(false);
            a->setText(tr("%1 (missing)").arg(text));
        }
    }
    if (!recent.isEmpty()) {
        recentMenu_->addSeparator();
        recentMenu_->addAction(tr("&Clear the List"), this, [this] {
            clearRecentModels();
            rebuildRecentMenu();
        });
    }
    recentMenu_->setEnabled(!recent.isEmpty());
}

void MainWindow::rebuildDeviceMenu() {
    deviceMenu_->clear();
    auto* group = new QActionGroup(deviceMenu_);
    QAction* automatic = deviceMenu_->addAction(tr("&Best Available"));
    automatic->setData(-1);
    group->addAction(automatic);
    for (int i = 0; i < devices_.size(); ++i) {
        QAction* a = deviceMenu_->addAction(tr("&%1  %2").arg(i).arg(devices_[i]));
        a->setData(i);
        group->addAction(a);
    }
    for (QAction* a : group->actions()) {
        a->setCheckable(true);
        a->setChecked(a->data().toInt() == device_);
    }
    if (!vulkanProblem_.isEmpty()) {
        deviceMenu_->addSeparator();
        QAction* why = deviceMenu_->addAction(tr("No usable Vulkan device: the CPU backend runs instead"));
        why->setEnabled(false);
        why->setToolTip(vulkanProblem_);
    }
    connect(group, &QActionGroup::triggered, this, [this](QAction* a) { setDevice(a->data().toInt()); });
}

void MainWindow::onDevicesListed(const QStringList& devices, int, const QString& problem) {
    devices_ = devices;
    vulkanProblem_ = problem;
    rebuildDeviceMenu();
    for (QAction* a : backendGroup_->actions())
        if (a->data().toString() == QLatin1String("vulkan"))
            a->setToolTip(problem.isEmpty() ? devices.join(QStringLiteral("\n")) : tr("Not available here: %1").arg(problem));
    if (!problem.isEmpty()) {
        // Said once, plainly: nothing is broken, the CPU backend does the work.
        const QString text = tr("No usable Vulkan device (%1): Strata runs on the CPU backend. For the GPU, install its "
                                "Vulkan driver (mesa-vulkan-drivers for AMD and Intel, the NVIDIA driver for NVIDIA).")
                                 .arg(problem);
        statusBar()->showMessage(text, 20000);
        statusDevice_->setToolTip(text);
    }
    emit devicesListed();
}

void MainWindow::showFind() {
    findBar_->show();
    find_->setFocus(Qt::ShortcutFocusReason);
    find_->selectAll();
}

int MainWindow::findToken(const QString& text, bool fromStart) {
    const RunResultPtr& run = state_->run();
    if (!run || text.isEmpty()) {
        findResult_->clear();
        return -1;
    }
    const int n = int(run->tokenTexts.size());
    const int from = fromStart ? -1 : state_->position();
    for (int step = 1; step <= n; ++step) {
        const int i = ((from < 0 ? -1 : from) + step) % n;
        if (run->tokenTexts[i].contains(text, Qt::CaseInsensitive)) {
            state_->setPosition(i);
            findResult_->setText(tr("position %1").arg(i));
            return i;
        }
    }
    findResult_->setText(tr("not in this prompt"));
    return -1;
}

bool MainWindow::eventFilter(QObject* watched, QEvent* e) {
    // Esc in the find field closes the find bar (and does not cancel a run).
    if (watched == find_ && (e->type() == QEvent::ShortcutOverride || e->type() == QEvent::KeyPress) &&
        static_cast<QKeyEvent*>(e)->key() == Qt::Key_Escape) {
        e->accept();
        if (e->type() == QEvent::KeyPress) findBar_->hide();
        return true;
    }
    return QMainWindow::eventFilter(watched, e);
}

void MainWindow::onModelLoaded(qint64 id, const ModelSummaryPtr& summary) {
    if (id != loadId_) return;  // an older request
    loadId_ = 0;
    setLoading(false);
    errorBanner_->hide();
    state_->setModel(summary);
    atlas_->setSummary(summary);
    stepper_->setLayerCount(int(summary->config.n_layers));
    stepper_->setLayer(0);
    chips_->setTokens({}, {});
    tree_->expand(atlas_->index(0, 0));
    tree_->expand(atlas_->find(QStringLiteral("block"), 0));
    selectPart(QStringLiteral("block"), 0);
    // Only a model that opened becomes the one a backend switch reopens.
    modelPath_ = pendingPath_;
    openedDemo_ = pendingDemo_;
    if (!openedDemo_) addRecent(summary->path);
    demoBanner_->setText(summary->config.demo_trained
        ? tr("<b>demonstration model: a tiny Llama 3 trained by Strata</b> \u2014 3 M parameters, 4 layers, the real "
             "Llama 3 tokenizer, trained on generated English (stories, facts, sums, chats, copying): it knows only "
             "that small world. Open a real checkpoint with File \u25b8 Open.")
        : tr("<b>demonstration model: random weights</b> \u2014 Llama 3 architecture and tokenizer, but its outputs "
             "mean nothing. Open a real checkpoint with File \u25b8 Open."));
    demoBanner_->setVisible(summary->config.is_demo);
    // The trained demo opens where docs/tour.md starts: the Attention view, at the strongest induction head.
    if (summary->config.demo_trained) {
        tabs_->setCurrentWidget(attentionView_);
        attentionView_->goToStrongestHeadNext();
    }
    if (!summary->backendNote.isEmpty()) showError(tr("choosing the backend"), summary->backendNote);
    updateStatus();
    emit modelReady();
    if (!prompt_->text().trimmed().isEmpty()) startRun();
}

void MainWindow::runPrompt(const QString& text) {
    prompt_->setText(text);
    startRun();
}

qint64 MainWindow::runTokens(const QString& label, const std::vector<int32_t>& tokens, bool logitLens) {
    if (!state_->model()) return 0;
    if (runId_) client_->cancelAll();
    runId_ = client_->runTokens(label, tokens, logitLens, state_->ablations());
    // The prompt line would name a different text than the tokens shown: empty it and say what is shown.
    prompt_->clear();
    prompt_->setPlaceholderText(tr("Showing %1 \u2014 type a prompt and press Enter to run your own").arg(label));
    statusBar()->showMessage(tr("Running %1\u2026").arg(label));
    return runId_;
}

void MainWindow::setLogitLens(bool on) { lens_->setChecked(on); }

void MainWindow::startRun() {
    if (!state_->model()) return;
    if (runId_) client_->cancelAll();  // a newer prompt replaces a running one
    runId_ = client_->run(prompt_->text(), lens_->isChecked(), state_->ablations());
    statusBar()->showMessage(tr("Running the prompt\u2026"));
}

void MainWindow::onRunFinished(const RunResultPtr& run) {
    if (run->id != runId_) return;
    runId_ = 0;
    errorBanner_->hide();
    state_->setRun(run);
    chips_->setTokens(run->tokenTexts, run->tokens);
    chips_->setSelected(state_->position());
    statusBar()->showMessage(tr("%1 tokens in %2 ms (prefill, every tensor kept)").arg(run->tokens.size()).arg(run->seconds * 1000.0, 0, 'f', 1), 10000);
    emit runReady();
}

void MainWindow::selectPart(const QString& key, int layer) {
    const bool inBlock = key.startsWith(QLatin1String("block"));
    const QModelIndex index = atlas_->find(key, inBlock ? layer : -1);
    if (!index.isValid()) return;
    if (inBlock) state_->setLayer(layer);
    tree_->setCurrentIndex(index);
    tree_->scrollTo(index);
}

void MainWindow::onAtlasCurrentChanged(const QModelIndex& index) {
    if (!index.isValid()) return;
    const Part part = atlas_->part(index);
    const int layer = atlas_->layer(index);
    const bool wasSyncing = syncing_;
    syncing_ = true;
    if (layer >= 0) state_->setLayer(layer);
    state_->setPart(part);
    syncing_ = wasSyncing;
    if (!syncing_) {
        ViewPage* v = preferredView(part);
        if (v) showView(v);
    }
    updateCard();
}

ViewPage* MainWindow::preferredView(const Part& part) const {
    ViewPage* current = static_cast<ViewPage*>(tabs_->currentWidget());
    const QString& key = part.key;
    const bool norm = key == QLatin1String("norm") || key.endsWith(QLatin1String("_norm"));
    if (current == gainsView_ && norm) return current;
    if (current == embeddingView_ && key == QLatin1String("tok_embeddings")) return current;
    if ((current == strataView_ || current == normsView_) && (key == QLatin1String("block") || key == QLatin1String("tok_embeddings")))
        return current;
    if (current == logitsView_ && (key == QLatin1String("output") || key == QLatin1String("model"))) return current;
    if (key.endsWith(QLatin1String("softmax"))) return attentionView_;
    return tensorView_;
}

void MainWindow::showView(ViewPage* view) { tabs_->setCurrentWidget(view); }

void MainWindow::syncAtlasToLayer() {
    // The stepper moved: keep the same part selected, in the new block.
    if (syncing_) return;
    const Part& part = state_->part();
    if (!part.perLayer) return;
    const QModelIndex index = atlas_->find(part.key, state_->layer());
    if (!index.isValid() || index == tree_->currentIndex()) return;
    syncing_ = true;
    tree_->setCurrentIndex(index);
    tree_->scrollTo(index);
    syncing_ = false;
}

void MainWindow::updateCard() {
    auto* view = static_cast<ViewPage*>(tabs_->currentWidget());
    CardContext ctx;
    ctx.config = state_->model() ? &state_->model()->config : nullptr;
    ctx.T = state_->positions();
    ctx.pos0 = state_->run() ? state_->run()->trace.pos0 : 0;
    ctx.layer = state_->layer();
    cards_->showCard(view ? view->cardId() : QString(), ctx);
}

void MainWindow::updateStatus() {
    const ModelSummaryPtr& m = state_->model();
    if (!m) {
        statusModel_->setText(tr("no model"));
        for (QLabel* l : {statusFormat_, statusDtype_, statusBackend_, statusDevice_}) l->clear();
        setWindowTitle(tr("Strata"));
        return;
    }
    const QString name = !m->config.is_demo     ? m->name
                         : m->config.demo_trained ? tr("%1 (demonstration model: a tiny trained Llama 3)").arg(m->name)
                                                  : tr("%1 (demonstration model: random weights)").arg(m->name);
    statusModel_->setText(tr("model: %1 \u00b7 %2 parameters").arg(name, groupDigits(m->parameters)));
    statusFormat_->setText(tr("format: %1").arg(m->format));
    statusDtype_->setText(tr("dtype: %1").arg(m->dtype));
    statusBackend_->setText(tr("backend: %1").arg(m->backend));
    statusDevice_->setText(tr("device: %1").arg(m->device));
    statusModel_->setToolTip(m->path);
    setWindowTitle(tr("Strata \u2014 %1").arg(name));
}

void MainWindow::showError(const QString& what, const QString& message) {
    lastError_ = tr("%1: %2").arg(what, message);
    errorBanner_->setText(tr("<b>%1</b>: %2").arg(what.toHtmlEscaped(), message.toHtmlEscaped()));
    errorBanner_->show();
    statusBar()->showMessage(lastError_, 15000);
    emit failed(lastError_);
}

}  // namespace strata::ui
