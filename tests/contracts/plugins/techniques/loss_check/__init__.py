"""A check of the loss gradient for overflow in every step, as dynamic loss scaling
(Micikevicius et al., "Mixed Precision Training", ICLR 2018) runs before it updates
the weights: one vector op reading the gradient the loss makes."""
