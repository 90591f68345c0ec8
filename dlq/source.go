package dlq

import "errors"

// Source streams records; *Store implements it, Items wraps a slice.
type Source interface {
	// Each calls fn for every record; fn may return ErrStop to end early.
	Each(fn func(DeadLetteredItem) error) error
}

// Items is an in-memory Source.
type Items []DeadLetteredItem

// Each calls fn for every record in slice order.
func (it Items) Each(fn func(DeadLetteredItem) error) error {
	for _, d := range it {
		if err := fn(d); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}
