package client

import "context"

// The …All helpers ask for page after page of a list, from its params'
// Cursor on, until one has no next cursor, and return every item; on an
// error, the items they had and the error. The CLI, the chaos run and the
// bench read whole lists this way.

// EndpointListAll is every endpoint, in id order (endpointList).
func (c *Client) EndpointListAll(ctx context.Context, p EndpointListParams) ([]Endpoint, error) {
	return listAll(p.Cursor, func(cursor *string) ([]Endpoint, string, error) {
		p.Cursor = cursor
		r, err := c.EndpointListWithResponse(ctx, &p)
		if err != nil {
			return nil, "", err
		}
		return r.JSON200.Items, r.JSON200.NextCursor, nil
	})
}

// DeadLetterListAll is every dead letter p selects (deadLetterList).
func (c *Client) DeadLetterListAll(ctx context.Context, p DeadLetterListParams) ([]DeadLetter, error) {
	return listAll(p.Cursor, func(cursor *string) ([]DeadLetter, string, error) {
		p.Cursor = cursor
		r, err := c.DeadLetterListWithResponse(ctx, &p)
		if err != nil {
			return nil, "", err
		}
		return r.JSON200.Items, r.JSON200.NextCursor, nil
	})
}

// StatsEndpointsAll is every endpoint's health (statsEndpoints).
func (c *Client) StatsEndpointsAll(ctx context.Context, p StatsEndpointsParams) ([]EndpointHealth, error) {
	return listAll(p.Cursor, func(cursor *string) ([]EndpointHealth, string, error) {
		p.Cursor = cursor
		r, err := c.StatsEndpointsWithResponse(ctx, &p)
		if err != nil {
			return nil, "", err
		}
		return r.JSON200.Endpoints, r.JSON200.NextCursor, nil
	})
}

// EventAttemptsAll is every attempt of event id's delivery to endpointID,
// oldest first (eventAttempts).
func (c *Client) EventAttemptsAll(ctx context.Context, id, endpointID string, p EventAttemptsParams) ([]Attempt, error) {
	return listAll(p.Cursor, func(cursor *string) ([]Attempt, string, error) {
		p.Cursor = cursor
		r, err := c.EventAttemptsWithResponse(ctx, id, endpointID, &p)
		if err != nil {
			return nil, "", err
		}
		return r.JSON200.Items, r.JSON200.NextCursor, nil
	})
}

// listAll asks list for page after page, from cursor on, until one has no
// next cursor.
func listAll[T any](cursor *string, list func(cursor *string) (items []T, next string, err error)) ([]T, error) {
	var all []T
	for {
		items, next, err := list(cursor)
		all = append(all, items...)
		if err != nil || next == "" {
			return all, err
		}
		cursor = &next
	}
}

// Delivery returns the event's delivery to endpointID.
func (e Event) Delivery(endpointID string) (Delivery, bool) {
	for _, d := range e.Deliveries {
		if d.EndpointID == endpointID {
			return d, true
		}
	}
	return Delivery{}, false
}

// Lane returns the correlation's lane of endpointID.
func (c Correlation) Lane(endpointID string) (Lane, bool) {
	for _, l := range c.Lanes {
		if l.EndpointID == endpointID {
			return l, true
		}
	}
	return Lane{}, false
}
