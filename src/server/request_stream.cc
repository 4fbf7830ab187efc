#include "server/request_stream.h"

namespace mamba::server {

const char* cancel_reason_name(CancelReason r) {
  switch (r) {
    case CancelReason::kClientGone: return "client_gone";
    case CancelReason::kClientNotReading: return "client_not_reading";
    case CancelReason::kShutdown: return "shutdown";
    case CancelReason::kAnswerEnded: return "answer_ended";
    case CancelReason::kNone: break;
  }
  return "";
}

std::uint64_t StreamSignal::count() const {
  std::lock_guard lk(mu_);
  return count_;
}

bool StreamSignal::wait(std::uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  return cv_.wait_for(lk, timeout, [&] { return count_ != seen; });
}

void StreamSignal::notify() {
  {
    std::lock_guard lk(mu_);
    ++count_;
  }
  cv_.notify_all();
}

void RequestStream::attach(std::shared_ptr<StreamSignal> signal) {
  std::lock_guard lk(mu_);
  signal_ = std::move(signal);
}

void RequestStream::wake(const std::shared_ptr<StreamSignal>& signal) {
  cv_.notify_all();
  if (signal) signal->notify();
}

bool RequestStream::take(Update& out, std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return !pending_.empty() || pending_prompt_ || done_; });
  if (pending_.empty() && !pending_prompt_ && !done_) return false;
  out.prompt = std::move(pending_prompt_);
  pending_prompt_.reset();
  out.tokens = std::move(pending_);
  pending_.clear();
  backlog_.store(0, std::memory_order_relaxed);
  out.done = done_;
  out.error = error_;
  return true;
}

void RequestStream::on_end(std::function<void(const SequenceStats&, const std::optional<Error>&)> fn) {
  {
    std::lock_guard lk(mu_);
    if (!done_) {
      on_end_ = std::move(fn);
      return;
    }
  }
  fn(stats_, error_);  // ended: stats_ and error_ no longer change
}

void RequestStream::run_on_end(std::function<void(const SequenceStats&, const std::optional<Error>&)> fn) {
  if (fn) fn(stats_, error_);
}

void RequestStream::push(TokenEvent ev) {
  std::shared_ptr<StreamSignal> signal;
  {
    std::lock_guard lk(mu_);
    pending_.push_back(std::move(ev));
    backlog_.store(pending_.size(), std::memory_order_relaxed);
    signal = signal_;
  }
  wake(signal);
}

void RequestStream::publish_prompt(PromptScores scores) {
  std::shared_ptr<StreamSignal> signal;
  {
    std::lock_guard lk(mu_);
    pending_prompt_ = std::move(scores);
    signal = signal_;
  }
  wake(signal);
}

void RequestStream::finish(SequenceStats stats, std::optional<TokenEvent> last) {
  std::function<void(const SequenceStats&, const std::optional<Error>&)> fn;
  std::shared_ptr<StreamSignal> signal;
  {
    std::lock_guard lk(mu_);
    if (last) pending_.push_back(std::move(*last));
    stats_ = std::move(stats);
    done_ = true;
    fn = std::move(on_end_);
    signal = signal_;
  }
  wake(signal);
  run_on_end(std::move(fn));
}

void RequestStream::fail(Error err, SequenceStats stats) {
  std::function<void(const SequenceStats&, const std::optional<Error>&)> fn;
  std::shared_ptr<StreamSignal> signal;
  {
    std::lock_guard lk(mu_);
    stats_ = std::move(stats);
    error_ = std::move(err);
    done_ = true;
    fn = std::move(on_end_);
    signal = signal_;
  }
  wake(signal);
  run_on_end(std::move(fn));
}

StreamReader::StreamReader(std::vector<RequestStream*> streams)
    : streams_(std::move(streams)), ended_(streams_.size(), false), open_(streams_.size()) {
  for (RequestStream* s : streams_) s->attach(signal_);
}

bool StreamReader::poll(std::size_t& which, RequestStream::Update& out) {
  for (std::size_t k = 0; k < streams_.size(); ++k) {
    const std::size_t i = (cursor_ + k) % streams_.size();
    if (ended_[i] || !streams_[i]->take(out, std::chrono::milliseconds(0))) continue;
    cursor_ = i + 1;
    if (out.done) {
      ended_[i] = true;
      --open_;
    }
    which = i;
    return true;
  }
  return false;
}

bool StreamReader::next(std::size_t& which, RequestStream::Update& out, std::chrono::milliseconds timeout) {
  if (open_ == 0) return false;
  const std::uint64_t seen = signal_->count();  // before polling: an event after it moves the count
  if (poll(which, out)) return true;
  return signal_->wait(seen, timeout) && poll(which, out);
}

void StreamReader::cancel_open(CancelReason why) {
  for (std::size_t i = 0; i < streams_.size(); ++i)
    if (!ended_[i]) streams_[i]->cancel(why);
}

}  // namespace mamba::server
