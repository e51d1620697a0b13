package activities

import "go.temporal.io/sdk/temporal"

// Search attribute keys hookflow's workflows set; devstack registers them.
var (
	CorrelationIDKey = temporal.NewSearchAttributeKeyKeyword("CorrelationId")
	SequenceKey      = temporal.NewSearchAttributeKeyInt64("Sequence")
	DeliveryStateKey = temporal.NewSearchAttributeKeyKeyword("DeliveryState")
)

func searchAttributes(correlationID string) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(CorrelationIDKey.ValueSet(correlationID))
}
