package task

import "sync"

// mailbox queues actions for the subtask goroutine. Other goroutines (RPC
// handlers) put mail; only the subtask goroutine runs it, so operator state
// is never touched concurrently. notify is signalled when the mailbox turns
// non-empty, and the subtask drains it in one batch.
type mailbox struct {
	notify chan struct{}
	mu     struct {
		sync.Mutex
		mails []func() error
	}
}

func newMailbox() *mailbox { return &mailbox{notify: make(chan struct{}, 1)} }

func (m *mailbox) put(f func() error) {
	m.mu.Lock()
	m.mu.mails = append(m.mu.mails, f)
	first := len(m.mu.mails) == 1
	m.mu.Unlock()
	if first {
		select {
		case m.notify <- struct{}{}:
		default:
		}
	}
}

func (m *mailbox) drain() []func() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mails := m.mu.mails
	m.mu.mails = nil
	return mails
}
