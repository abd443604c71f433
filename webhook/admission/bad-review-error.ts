/** A request that is not an AdmissionReview we can answer: the HTTP layer answers 400. */
export class BadReviewError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BadReviewError';
  }
}
