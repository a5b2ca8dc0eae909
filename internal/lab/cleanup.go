package lab

import "sync"

// Cleaner takes the undo of something just made. testing.TB is a Cleaner
// (its cleanups run when the test ends); so is *Stack.
type Cleaner interface {
	Cleanup(func())
}

// Stack is a Cleaner for commands: Close runs the registered functions in
// the reverse order of their registration, as testing does. The zero value
// is ready to use; it is safe for concurrent use.
type Stack struct {
	mu  sync.Mutex
	fns []func()
}

// Cleanup registers f to run at Close.
func (s *Stack) Cleanup(f func()) {
	s.mu.Lock()
	s.fns = append(s.fns, f)
	s.mu.Unlock()
}

// Close runs every registered function, last registered first, and
// forgets them: a second Close does nothing.
func (s *Stack) Close() {
	for {
		s.mu.Lock()
		n := len(s.fns)
		if n == 0 {
			s.mu.Unlock()
			return
		}
		f := s.fns[n-1]
		s.fns = s.fns[:n-1]
		s.mu.Unlock()
		f()
	}
}
